#!/usr/bin/env python3
"""bench/kt_tune.py: Kernel Tuner on the spaces of recipes/kt_matmul.lua and
recipes/kt_vecadd.lua, with the same kernels (kernels/cuda/kt_matmul.cu,
kernels/cuda/vecadd.cu), for comparing evaluation throughput with kwb in one
sitting (tests/gpu/kt_compare). Kernel Tuner's defaults otherwise: its own
timing, no answer check unless --verify. Prints one JSON object per space:
the wall seconds of tune_kernel, the settings it evaluated, the failures it
recorded, and its best time.

  python3 bench/kt_tune.py [--space matmul|vecadd|both] [--verify]
"""
import argparse
import json
import os
import sys
import time

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def read(path):
    with open(os.path.join(ROOT, path)) as f:
        return f.read()


def matmul(kt, verify):
    n = 4096
    rng = np.random.default_rng(1)
    a = rng.uniform(-1, 1, (n, n)).astype(np.float32)
    b = rng.uniform(-1, 1, (n, n)).astype(np.float32)
    c = np.zeros((n, n), dtype=np.float32)
    args = [np.int32(n), np.int32(n), np.int32(n), np.float32(1), a, b, np.float32(0), c]
    params = {"BSX": [16, 32, 64], "BSY": [1, 2, 4, 8, 16, 32], "TSX": [1, 2, 4, 8], "TSY": [1, 2, 4, 8]}
    answer = None
    if verify:
        answer = [None] * 7 + [a @ b]
    return kt.tune_kernel("kt_matmul", read("kernels/cuda/kt_matmul.cu"), (n, n), args, params,
                          block_size_names=["BSX", "BSY"], grid_div_x=["BSX", "TSX"], grid_div_y=["BSY", "TSY"],
                          restrictions=["BSX == BSY * TSY", "BSX * BSY <= 1024"], lang="cupy",
                          answer=answer, atol=2e-2, verbose=False, quiet=True)


def vecadd(kt, verify):
    n = 10_000_000
    rng = np.random.default_rng(1)
    a = rng.uniform(-1, 1, n).astype(np.float32)
    b = rng.uniform(-1, 1, n).astype(np.float32)
    c = np.zeros(n, dtype=np.float32)
    args = [np.int32(n), a, b, c]
    params = {"BLOCK": [128 + 64 * i for i in range(15)], "VEC": [1], "ITEMS": [1]}
    answer = [None, None, None, a + b] if verify else None
    return kt.tune_kernel("vecadd", read("kernels/cuda/vecadd.cu"), n, args, params,
                          block_size_names=["BLOCK"], grid_div_x=["BLOCK"], lang="cupy",
                          answer=answer, verbose=False, quiet=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--space", choices=["matmul", "vecadd", "both"], default="both")
    ap.add_argument("--verify", action="store_true", help="give Kernel Tuner the answer to check every setting")
    opt = ap.parse_args()
    import kernel_tuner as kt
    spaces = ["vecadd", "matmul"] if opt.space == "both" else [opt.space]
    for space in spaces:
        t0 = time.perf_counter()
        results, env = (matmul if space == "matmul" else vecadd)(kt, opt.verify)
        seconds = time.perf_counter() - t0
        ok = [r for r in results if isinstance(r.get("time"), (int, float))]
        failed = len(results) - len(ok)
        best = min(ok, key=lambda r: r["time"]) if ok else None
        print(json.dumps({"space": space, "tune_kernel_seconds": seconds, "settings": len(results),
                          "failed": failed, "verified": opt.verify,
                          "best_ms": best["time"] if best else None,
                          "best": {k: best[k] for k in best if k.isupper()} if best else None,
                          "kernel_tuner": kt.__version__, "device": env.get("device_name")}))
        sys.stdout.flush()


if __name__ == "__main__":
    main()
