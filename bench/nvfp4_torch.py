#!/usr/bin/env python3
"""nvfp4_torch.py: the PyTorch bf16 baseline of the routed-experts MoE layer at DeepSeek-V3
dims (H 7168, I 2048, 256 experts, top-8), the layer kwb's NVFP4 kernels are compared against.

What is timed: everything after routing, captured in one CUDA graph and replayed. The
(token, slot) pairs are sorted by expert (stable argsort), x rows gathered, per-expert end
offsets built (int32), gate_up = torch._grouped_mm(xs, w13^T), h = silu(gate) * up in bf16,
down = torch._grouped_mm(h, w2^T), times the routing weight, index_add_ in fp32 back to
[T, H], cast to bf16. Weights bf16 w13 [E, 2I, H] (rows 0..I-1 gate, I..2I-1 up) and
w2 [E, H, I], normal(0, 0.02); x normal(0, 1). L2 is made cold before every replay by
writing a 256 MB buffer (outside the timed events). Each T is also checked once against
a per-token fp32 loop on a few tokens.

Routing (inputs, not timed): uniform = 8 distinct experts a token, uniformly; skewed =
expert e drawn with probability proportional to 1/(e+1) among those the token does not
have yet; weights 0.5 + u normalised to sum 1. These follow nvfp4_gen_routing in
kernels/nvfp4_moe/nvfp4_ref.c in distribution, not bit for bit; --routing-file PATH takes
exact ids instead (raw little-endian int32 ids [T*8], then float32 weights [T*8]).

Needs one CUDA GPU of compute capability 9.0 or 10.0 (the graph-capturable fast path of
torch._grouped_mm) and about 30 GB of GPU memory. Run:
    python3 bench/nvfp4_torch.py --json
    python3 bench/nvfp4_torch.py --T 1,4,16 --routing both
"""
import argparse, json, statistics, subprocess, sys
import torch
import torch.nn.functional as F

H, I, E, K = 7168, 2048, 256, 8
FLUSH_BYTES = 256 << 20


def pick_grouped_mm():
    if hasattr(torch, "_grouped_mm"):
        return "torch._grouped_mm", lambda a, b, offs: torch._grouped_mm(a, b, offs=offs)
    if hasattr(F, "grouped_mm"):
        return "torch.nn.functional.grouped_mm", lambda a, b, offs: F.grouped_mm(a, b, offs=offs)
    sys.exit("error: this PyTorch (%s) has neither torch._grouped_mm nor "
             "torch.nn.functional.grouped_mm; the baseline needs one of them" % torch.__version__)


def moe_layer(gmm, x, ids, tw, w13t, w2t):
    """Routed experts: x bf16 [T, H], ids int32 [T, K], tw f32 [T, K], w13t [E, H, 2I] and
    w2t [E, I, H] (transposed views). Static shapes, no host synchronisation."""
    T, k = ids.shape
    flat = ids.reshape(-1)
    order = torch.argsort(flat, stable=True)          # (token, slot) pairs grouped by expert
    tok = order // k                                  # the token of each sorted pair
    xs = x.index_select(0, tok)                       # [T*k, H]
    # Tokens per expert. torch.bincount would read max(ids) back to the host, which a
    # CUDA graph cannot capture; scatter_add_ of ones gives the same counts on the device.
    counts = torch.zeros(w13t.shape[0], dtype=torch.int32, device=x.device)
    counts.scatter_add_(0, flat.long(), torch.ones_like(flat))
    offs = torch.cumsum(counts, 0, dtype=torch.int32)  # end offset of each expert's rows
    gu = gmm(xs, w13t, offs)                          # [T*k, 2I] bf16
    n = w2t.shape[1]
    h = F.silu(gu[:, :n]) * gu[:, n:]                 # bf16
    down = gmm(h, w2t, offs)                          # [T*k, H] bf16
    y = down.float() * tw.reshape(-1).index_select(0, order).unsqueeze(1)
    out = torch.zeros(T, x.shape[1], dtype=torch.float32, device=x.device)
    out.index_add_(0, tok, y)
    return out.to(torch.bfloat16)


def reference(x, ids, tw, w13, w2, tokens):
    """fp32 loop over tokens and slots; returns {token: out [H] f32}."""
    res = {}
    for t in tokens:
        xt, acc = x[t].float(), torch.zeros(x.shape[1], device=x.device)
        for j in range(ids.shape[1]):
            e = int(ids[t, j])
            w = w13[e].float()
            h = F.silu(w[:I] @ xt) * (w[I:] @ xt)
            acc += float(tw[t, j]) * (w2[e].float() @ h)
        res[t] = acc
    return res


def make_routing(kind, T, seed):
    g = torch.Generator().manual_seed(seed)
    if kind == "uniform":   # a uniformly random ordered subset of K experts
        ids = torch.rand(T, E, generator=g).argsort(dim=1)[:, :K]
    else:                   # sequential draws without replacement, p(e) ~ 1/(e+1)
        p = 1.0 / torch.arange(1, E + 1, dtype=torch.float64)
        ids = torch.multinomial(p.repeat(T, 1), K, replacement=False, generator=g)
    r = 0.5 + torch.rand(T, K, generator=g, dtype=torch.float64)
    return ids.to(torch.int32), (r / r.sum(1, keepdim=True)).to(torch.float32)


def read_routing(path):
    data = bytearray(open(path, "rb").read())
    if sys.byteorder != "little" or len(data) == 0 or len(data) % (8 * K):
        sys.exit("error: %s: expected int32 ids [T*%d] then float32 weights [T*%d], "
                 "little-endian (%d bytes)" % (path, K, K, len(data)))
    T = len(data) // (8 * K)
    ids = torch.frombuffer(data, dtype=torch.int32, count=T * K).clone().view(T, K)
    tw = torch.frombuffer(data, dtype=torch.float32, count=T * K, offset=4 * T * K).clone().view(T, K)
    if int(ids.min()) < 0 or int(ids.max()) >= E:
        sys.exit("error: %s: an expert id is outside 0..%d" % (path, E - 1))
    return ids, tw


def capture(fn):
    """Warm up on a side stream, then capture fn() in a CUDA graph (PyTorch's recipe)."""
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for _ in range(3):
            fn()
    torch.cuda.current_stream().wait_stream(s)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        out = fn()
    return g, out


def time_replays(g, flush, min_n, min_s):
    times = []
    while len(times) < min_n or sum(times) < 1000.0 * min_s:
        evs = []
        for _ in range(20):
            flush.zero_()                                     # cold L2, not timed
            a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            a.record()
            g.replay()
            b.record()
            evs.append((a, b))
        torch.cuda.synchronize()
        times += [a.elapsed_time(b) for a, b in evs]
        if len(times) >= 20000:
            break
    return statistics.median(times), min(times), len(times)


def gpu_clocks():
    try:
        r = subprocess.run(["nvidia-smi", "--query-gpu=clocks.sm,clocks.max.sm,clocks.mem",
                            "--format=csv,noheader"], capture_output=True, text=True, timeout=20)
        if r.returncode == 0 and r.stdout.strip():
            return "sm, max sm, mem: " + "; ".join(r.stdout.strip().splitlines())
    except (OSError, subprocess.SubprocessError):
        pass
    return "unknown (nvidia-smi did not answer)"


def main():
    ap = argparse.ArgumentParser(description="PyTorch bf16 MoE baseline (DeepSeek-V3 routed experts)")
    ap.add_argument("--T", default=None, help="token counts, e.g. 1,4,16 (default 1,4,16,64,256,1024,4096)")
    ap.add_argument("--routing", default="uniform", choices=["uniform", "skewed", "both"])
    ap.add_argument("--routing-file", default=None, help="raw int32 ids [T*8] then float32 weights [T*8]")
    ap.add_argument("--json", action="store_true", help="one JSON object per line on stdout")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--min-n", type=int, default=20, help="at least this many replays")
    ap.add_argument("--min-s", type=float, default=0.5, help="and at least this many timed seconds")
    a = ap.parse_args()
    if not torch.cuda.is_available():
        sys.exit("error: no CUDA device")
    info = sys.stderr if a.json else sys.stdout
    dev = torch.device("cuda")
    torch.backends.cuda.matmul.allow_tf32 = False      # the fp32 reference stays fp32
    name, cap = torch.cuda.get_device_name(dev), torch.cuda.get_device_capability(dev)
    op, gmm = pick_grouped_mm()
    print("torch %s (CUDA %s), %s (sm_%d%d), %s" % (torch.__version__, torch.version.cuda, name,
                                                    cap[0], cap[1], op), file=info)
    print("clocks before: " + gpu_clocks(), file=info)
    if cap not in ((9, 0), (10, 0)):
        print("warning: %s takes its fallback path on sm_%d%d; that path reads the offsets back "
              "to the host and cannot be captured in a CUDA graph" % (op, cap[0], cap[1]), file=info)

    if a.routing_file:
        ids_f, tw_f = read_routing(a.routing_file)
        if a.T is not None and [int(v) for v in a.T.split(",")] != [ids_f.shape[0]]:
            sys.exit("error: --T %s does not match the %d tokens of %s"
                     % (a.T, ids_f.shape[0], a.routing_file))
        Ts, kinds = [ids_f.shape[0]], ["file"]
    else:
        Ts = [int(v) for v in (a.T or "1,4,16,64,256,1024,4096").split(",")]
        kinds = ["uniform", "skewed"] if a.routing == "both" else [a.routing]

    gen = torch.Generator(device=dev)   # seed offsets as in kwb: x +0, routing +1, w13 +2, w2 +3
    bf16 = dict(dtype=torch.bfloat16, device=dev)
    w13 = torch.randn(E, 2 * I, H, generator=gen.manual_seed(a.seed + 2), **bf16).mul_(0.02)
    w2 = torch.randn(E, H, I, generator=gen.manual_seed(a.seed + 3), **bf16).mul_(0.02)
    w13t, w2t = w13.transpose(-2, -1), w2.transpose(-2, -1)   # [E, H, 2I] and [E, I, H]
    flush = torch.empty(FLUSH_BYTES // 4, dtype=torch.int32, device=dev)

    if not a.json:
        print("%6s %8s %8s %10s %10s %6s %12s"
              % ("T", "routing", "experts", "median_ms", "min_ms", "n", "max_abs_err"))
    failed = False
    for kind in kinds:
        for T in Ts:
            x = torch.randn(T, H, generator=gen.manual_seed(a.seed), **bf16)
            ids, tw = (ids_f, tw_f) if kind == "file" else make_routing(kind, T, a.seed + 1)
            ids, tw = ids.to(dev), tw.to(dev)
            try:
                g, out = capture(lambda: moe_layer(gmm, x, ids, tw, w13t, w2t))
            except RuntimeError as e:
                sys.exit("error: capturing the layer in a CUDA graph failed at T=%d: %s" % (T, e))
            g.replay()
            torch.cuda.synchronize()
            tokens = sorted({0, T // 3, (2 * T) // 3, T - 1})
            ref = reference(x, ids, tw, w13, w2, tokens)
            err = max(float((out[t].float() - r).abs().max()) for t, r in ref.items())
            scale = max(float(r.abs().max()) for r in ref.values())
            if not err <= 0.03 * scale:
                failed = True
                print("MISMATCH at T=%d %s: max abs error %.4g against max |ref| %.4g"
                      % (T, kind, err, scale), file=info)
            med, mn, n = time_replays(g, flush, a.min_n, a.min_s)
            nexp = int(torch.unique(ids).numel())
            if a.json:
                print(json.dumps({"T": T, "routing": kind, "median_ms": round(med, 5),
                                  "min_ms": round(mn, 5), "n": n, "distinct_experts": nexp,
                                  "device": name, "torch": torch.__version__,
                                  "max_abs_err": err}), flush=True)
            else:
                print("%6d %8s %8d %10.4f %10.4f %6d %12.3g"
                      % (T, kind, nexp, med, mn, n, err), flush=True)
            del g, out
            torch.cuda.empty_cache()
    print("clocks after: " + gpu_clocks(), file=info)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
