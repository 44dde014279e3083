#!/usr/bin/python3
"""tests/python/test_start.py: the start kernels python/kwb_start.py writes, checked against the
module's own forward. Run with an interpreter that imports torch (Debian's /usr/bin/python3).

For every model under tests/python/models/ with a spec beside it:
  c      the C kernel, built with cc into a shared object, called through ctypes on random
         inputs (the weights: the module's own state_dict tensors, drawn again from a seed so
         none is left at its initial constant) at the spec's example sizes and at other sizes,
         compared with forward at the case's tolerance; every output is poisoned (NaN) first
  cuda   the CUDA kernel, built with nvcc -arch=sm_90 -cubin when nvcc is there, and run on the
         host: compiled as C++ with blockIdx/threadIdx as globals and a loop over every thread
         of the spec's launch (block 256, one thread per element of the first output)
and models the translator refuses exit 2 with the op and node named.
One line per check, "ok ..." or "FAIL ..."; the exit status is 1 if any failed.
Case names as arguments run only those.
"""
import ctypes
import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
TOOL = os.path.join(ROOT, "python", "kwb_start.py")
MODELS = os.path.join(HERE, "models")

DTYPES = {"f32": torch.float32, "f64": torch.float64, "f16": torch.float16, "bf16": torch.bfloat16,
          "i8": torch.int8, "u8": torch.uint8, "i32": torch.int32, "i64": torch.int64}

def every_bit_pattern(spec, env, g):
    """casts: floats from 2^-30 to 2^20 and halfway cases, inf and NaN; every 16-bit pattern."""
    n = env["N"]
    x = torch.randn(n, generator=g) * torch.pow(2.0, torch.randint(-30, 20, (n,), generator=g).float())
    ties = torch.arange(n, dtype=torch.int32) * 4096 + 0x38000000 + 0x1000     # f16 ties (rest 0x1000)
    x[: n // 4] = ties[: n // 4].view(torch.float32)
    x[n // 4: n // 2] = (torch.arange(n // 4, dtype=torch.int32) * 65536 + 0x3f808000).view(torch.float32)  # bf16 ties
    x[:4] = torch.tensor([float("inf"), float("-inf"), float("nan"), 65520.0])
    bits = torch.arange(n, dtype=torch.int32) % 65536
    bits = torch.where(bits >= 32768, bits - 65536, bits).to(torch.int16)
    return [x, bits.view(torch.float16), bits.view(torch.bfloat16)]


# name: (tolerance (atol = rtol), other sizes to run at besides the spec's example values,
#        how to draw the inputs when not randn)
CASES = {
    "elementwise": (1e-4, {"M": 3, "N": 7}),
    "reduction": (1e-4, {"B": 2, "R": 5, "C": 9}),
    "softmax": (1e-4, {"B": 5, "D": 33}),
    "matmul": (1e-4, {"M": 4, "K": 129, "N": 3}),
    "linear_relu": (1e-4, {"batch": 3}),
    "layernorm": (1e-4, {"N": 2}),
    "views": (1e-4, {"B": 2, "M": 3, "K": 4, "N": 6}),
    "bf16": (1e-2, {"R": 3, "C": 8}),
    "misc": (1e-4, {"M": 2, "K": 3, "N": 9}),
    "attention": (1e-4, {"B": 3, "S": 5}),
    "casts": (0, {"N": 65536}, every_bit_pattern),
}
# name: the message the translator must give (exit status 2)
REFUSED = {
    "conv": "kwb_start: no plain kernel for torch.nn.functional.conv2d (node conv2d); write a start kernel by hand",
    "inplace": "kwb_start: no plain kernel for Tensor.mul_ (in place) (node mul_); write a start kernel by hand",
}

SHIM = r"""
#include <math.h>
#include <string.h>
struct kdim3 { unsigned x, y, z; };
static kdim3 blockIdx, blockDim, threadIdx;
#define __global__
#define __device__
#define __forceinline__ inline
static inline unsigned __float_as_uint(float f) { unsigned u; memcpy(&u, &f, 4); return u; }
static inline float __uint_as_float(unsigned u) { float f; memcpy(&f, &u, 4); return f; }
static inline float __int_as_float(int i) { float f; memcpy(&f, &i, 4); return f; }
"""

failures = 0


def report(ok, what, detail=""):
    global failures
    if not ok:
        failures += 1
    print("%s %s%s" % ("ok" if ok else "FAIL", what, (": " + detail) if detail and not ok else ""))
    sys.stdout.flush()


def load_module(name):
    spec = importlib.util.spec_from_file_location("case_" + name, os.path.join(MODELS, name + ".py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def generate(name, lang):
    r = subprocess.run([sys.executable, TOOL, os.path.join(MODELS, name + ".py"), os.path.join(MODELS, name + ".json"),
                        lang, "kern"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True)
    return r.returncode, r.stdout, r.stderr


def build(cmd):
    r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, universal_newlines=True)
    return r.returncode == 0, r.stdout


def draw(spec, env, mod, seed, inputs_of=None):
    """Inputs at the sizes env gives, the module with fresh weights, and forward's result."""
    g = torch.Generator().manual_seed(seed)
    inputs = []
    for item in spec["inputs"]:
        shape = [env[d] if isinstance(d, str) else d for d in item["dims"]]
        inputs.append((torch.randn(shape, generator=g) * 1.5).to(DTYPES[item["dtype"]]))
    if inputs_of is not None:
        inputs = inputs_of(spec, env, g)
    torch.manual_seed(seed)
    model = mod.Model(*mod.get_init_inputs())
    with torch.no_grad():
        for t in model.state_dict().values():
            if t.is_floating_point():
                t.copy_(torch.randn(t.shape, generator=g) * 0.5)
    consts = {c["index"]: c["value"] for c in spec.get("consts", [])}
    it = iter(inputs)
    args = [consts[i] if i in consts else next(it) for i in range(len(inputs) + len(consts))]
    with torch.no_grad():
        ref = model(*args)
    ref = list(ref) if isinstance(ref, (tuple, list)) else [ref]
    weights = [model.state_dict()[w["param"]].contiguous() for w in spec.get("weights", [])]
    return inputs, weights, ref


def poisoned_outputs(spec, env):
    outs = []
    for item in spec["outputs"]:
        shape = [env[d] if isinstance(d, str) else d for d in item["dims"]]
        dt = DTYPES[item["dtype"]]
        outs.append(torch.full(shape, float("nan"), dtype=dt) if dt.is_floating_point
                    else torch.full(shape, -7, dtype=dt))
    return outs


def compare(spec, outs, ref, tol):
    for item, o, r in zip(spec["outputs"], outs, ref):
        if o.shape != r.shape or o.dtype != r.dtype:
            return "%s: %s %s, forward gives %s %s" % (item["name"], o.dtype, tuple(o.shape), r.dtype, tuple(r.shape))
        if not o.is_floating_point():
            if not torch.equal(o, r):
                return "%s differs at %d elements" % (item["name"], int((o != r).sum()))
            continue
        o64, r64 = o.double(), r.double()
        bad = ~((o64 - r64).abs() <= tol + tol * r64.abs()) & ~(o64 == r64) & ~(o64.isnan() & r64.isnan())
        if bad.any():
            k = int(bad.flatten().nonzero()[0])
            return "%s differs at %d elements (first: flat %d, %r vs %r)" % (
                item["name"], int(bad.sum()), k, float(o64.flatten()[k]), float(r64.flatten()[k]))
    return None


def run_sizes(spec, tol, alt):
    example = {v["name"]: v["value"] for v in spec.get("vars", [])}
    yield "example sizes", example, 1
    yield "sizes " + " ".join("%s=%d" % kv for kv in sorted(alt.items())), dict(example, **alt), 2


def call_args(spec, env, inputs, weights, outs):
    return [env[v["name"]] for v in spec.get("vars", [])] + [t.data_ptr() for t in inputs + weights + outs]


def argtypes(spec):
    n = len(spec["inputs"]) + len(spec.get("weights", [])) + len(spec["outputs"])
    return [ctypes.c_int] * len(spec.get("vars", [])) + [ctypes.c_void_p] * n


def check_c(name, spec, mod, tol, alt, inputs_of, tmp):
    rc, src, err = generate(name, "c")
    if rc != 0:
        return report(False, "%s c: generate" % name, err.strip())
    path = os.path.join(tmp, name + ".c")
    with open(path, "w") as f:
        f.write(src)
    so = os.path.join(tmp, name + "_c.so")
    ok, log = build(["cc", "-std=c11", "-O1", "-Wall", "-Wextra", "-Werror", "-shared", "-fPIC", "-o", so, path, "-lm"])
    report(ok, "%s c: builds with -Wall -Wextra -Werror" % name, log.strip()[:2000])
    if not ok:
        return
    lib = ctypes.CDLL(so)
    lib.kern.argtypes = argtypes(spec)
    lib.kern.restype = None
    for label, env, seed in run_sizes(spec, tol, alt):
        inputs, weights, ref = draw(spec, env, mod, seed, inputs_of)
        outs = poisoned_outputs(spec, env)
        lib.kern(*call_args(spec, env, inputs, weights, outs))
        bad = compare(spec, outs, ref, tol)
        report(bad is None, "%s c: matches forward at %s" % (name, label), bad or "")


def check_cuda(name, spec, mod, tol, alt, inputs_of, tmp):
    rc, src, err = generate(name, "cuda")
    if rc != 0:
        return report(False, "%s cuda: generate" % name, err.strip())
    cu = os.path.join(tmp, name + ".cu")
    with open(cu, "w") as f:
        f.write(src)
    if shutil.which("nvcc"):
        ok, log = build(["nvcc", "-arch=sm_90", "-cubin", "-Werror", "all-warnings", "-o", cu + ".cubin", cu])
        report(ok, "%s cuda: builds with nvcc -arch=sm_90 -cubin" % name, log.strip()[:2000])
    else:
        print("skip %s cuda: no nvcc on the PATH, the cubin is not built" % name)
    # the same source on the host: every thread of the launch, one after another
    sig = src[src.index("void kern(") + len("void kern("):]
    sig = sig[:sig.index(")")]
    names = [p.split("*")[-1].split()[-1] for p in sig.split(",")]
    host = os.path.join(tmp, name + "_cuda_host.cpp")
    with open(host, "w") as f:
        f.write(SHIM + src + "\nextern \"C\" void launch(unsigned grid, unsigned block, %s) {\n"
                "    blockDim.x = block;\n"
                "    for (unsigned blk_ = 0; blk_ < grid; blk_++)\n"
                "        for (unsigned thr_ = 0; thr_ < block; thr_++) {\n"
                "            blockIdx.x = blk_; threadIdx.x = thr_;\n"
                "            kern(%s);\n"
                "        }\n}\n" % (sig, ", ".join(names)))
    so = os.path.join(tmp, name + "_cuda.so")
    ok, log = build(["c++", "-O1", "-shared", "-fPIC", "-o", so, host, "-lm"])
    report(ok, "%s cuda: builds on the host as C++" % name, log.strip()[:2000])
    if not ok:
        return
    lib = ctypes.CDLL(so)
    lib.launch.argtypes = [ctypes.c_uint, ctypes.c_uint] + argtypes(spec)
    lib.launch.restype = None
    for label, env, seed in run_sizes(spec, tol, alt):
        inputs, weights, ref = draw(spec, env, mod, seed, inputs_of)
        outs = poisoned_outputs(spec, env)
        n0 = outs[0].numel()
        lib.launch((n0 + 255) // 256, 256, *call_args(spec, env, inputs, weights, outs))
        bad = compare(spec, outs, ref, tol)
        report(bad is None, "%s cuda: matches forward at %s, run on the host" % (name, label), bad or "")


def check_refused(name, want):
    for lang in ("c", "cuda"):
        rc, src, err = generate(name, lang)
        report(rc == 2 and err.strip() == want and src == "", "%s %s: refused with exit status 2" % (name, lang),
               "exit status %d, stderr %r" % (rc, err.strip()))


def reduction_loop_indents(src):
    """The indentation of every reduction loop (a loop over an r variable) in the source."""
    return sorted(set(len(l) - len(l.lstrip()) for l in src.splitlines()
                      if re.match(r"\s*for \((int64_t|long long) r[0-9]+ ", l)))


def check_hoisting():
    """A reduction sits at the outermost loop where its indices are defined, never once per
    element of what it reduces:
      softmax c        a row's max and sum inside the row loop only (indent 8)
      attention c      the scores' and the output's dot products inside their element loops
                       (8 + 4 and one more for the dot product's loop: 12, 16); the softmax's
                       max and sum once per row of scores
      attention cuda   a thread's softmax max and sum over the scores at the kernel's top level
                       (4, each score's dot product inside: 8), not inside the loop of the
                       output's dot product (which would put them at 8 and 12)."""
    for name, lang, want in (("softmax", "c", [8]), ("attention", "c", [12, 16]), ("attention", "cuda", [4, 8])):
        rc, src, err = generate(name, lang)
        got = reduction_loop_indents(src) if rc == 0 else err
        report(got == want, "%s %s: reductions hoisted out of the loops they do not depend on" % (name, lang),
               "reduction loops at indents %s, want %s" % (got, want))


def check_bad_input(tmp):
    """A spec or model that cannot be read: exit status 1, the file and field named."""
    model = os.path.join(MODELS, "softmax.py")
    with open(os.path.join(MODELS, "softmax.json")) as f:
        good = json.load(f)
    cases = []
    spec = json.loads(json.dumps(good))
    del spec["inputs"][0]["dtype"]
    cases.append(("an input without a dtype", model, spec, 1, "inputs[0] has no dtype"))
    spec = json.loads(json.dumps(good))
    spec["outputs"][0]["dtype"] = "f64"
    cases.append(("an output dtype the model does not give", model, spec, 1,
                  "output out is f32 in the model, f64 in the spec"))
    spec = json.loads(json.dumps(good))
    spec["inputs"][0]["dims"] = ["B", "Q"]
    cases.append(("a dim that is no var", model, spec, 1, "inputs[0].dims[1] 'Q' is neither a var nor an integer"))
    cases.append(("a model file that is not there", os.path.join(tmp, "none.py"), good, 1, "none.py: no such file"))
    for what, model_path, spec, want_rc, want in cases:
        path = os.path.join(tmp, "bad.json")
        with open(path, "w") as f:
            json.dump(spec, f)
        r = subprocess.run([sys.executable, TOOL, model_path, path, "c"], stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, universal_newlines=True)
        report(r.returncode == want_rc and want in r.stderr and r.stdout == "",
               "%s: exit status %d naming it" % (what, want_rc), "exit status %d, stderr %r" % (r.returncode, r.stderr))


def main():
    tmp = tempfile.mkdtemp(prefix="kwb-start-")
    try:
        only = set(sys.argv[1:])   # case names to run (default: all)
        for name, case in CASES.items():
            if only and name not in only:
                continue
            tol, alt, inputs_of = (case + (None,))[:3]
            with open(os.path.join(MODELS, name + ".json")) as f:
                spec = json.load(f)
            mod = load_module(name)
            check_c(name, spec, mod, tol, alt, inputs_of, tmp)
            check_cuda(name, spec, mod, tol, alt, inputs_of, tmp)
        for name, want in REFUSED.items():
            if only and name not in only:
                continue
            check_refused(name, want)
        if not only:
            check_hoisting()
            check_bad_input(tmp)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print("%d failed" % failures)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
