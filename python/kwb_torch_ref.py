# kwb_torch_ref.py: the reference process of a PyTorch problem (kwb.problems.torch).
#
# kwb starts it (python3 -c THIS), owns it and kills it; it shares no address
# space and no CUDA context with any candidate. Requests and answers are JSON
# lines on stdin and stdout; buffers go both ways through the shared region
# kwb maps as this process's fd 3. Every answer has "ok"; a failure is
# {"ok": false, "error": sentence}.
#
#   {"op": "load", "file": F, "seed": S, "device": "cpu"|"cuda", "precision": "f64"|"module"}
#       the module file in KernelBench's format (class Model, get_inputs,
#       get_init_inputs), or a plain function (fn = NAME in the file, with
#       get_inputs); its weights drawn from seed S (a parameter or buffer left
#       constant by its initialisation, zeros or ones, is drawn again around
#       that value, so no reference is constant by accident)
#   {"op": "probe"}   -> {"spec": ...}: inputs, weights, outputs and which
#       dimensions may vary, tried on the module itself
#   {"op": "weights", "at": [[name, offset], ...]}   the weights' bytes into the region
#   {"op": "call", "dims": {var: n}, "at": {name: offset}}
#       the inputs and weights read from the region, forward run, each
#       output written at its offset after its dtype and shape are checked
#   {"op": "map"}     the region mapped again (kwb grew it)
#   {"op": "time", "dims": {var: n}, "spec": ..., "mode": "eager"|"graph"|"compile", "target": s, ...}
#       -> {"samples": [seconds, ...]} or {"skipped": why}: the module (in its own
#       dtype, its weights as loaded) on inputs drawn here as the spec says, timed
#       as kwb times a kernel: on the GPU each sample a CUDA graph's replay (graph,
#       compile) or a call (eager) between events, the L2 flushed before each; on
#       the CPU the calling thread's CPU time of a call, one thread; "package": an
#       op kwb exported, timed in the module's place (the timer checked against kwb's)
import importlib.util
import inspect
import json
import math
import mmap
import os
import sys
import traceback

import torch

DTYPES = {
    torch.float32: "f32", torch.float64: "f64", torch.float16: "f16", torch.bfloat16: "bf16",
    torch.int8: "i8", torch.uint8: "u8", torch.int32: "i32", torch.int64: "i64", torch.bool: "u8",
}
TORCH_OF = {"f32": torch.float32, "f64": torch.float64, "f16": torch.float16, "bf16": torch.bfloat16,
            "i8": torch.int8, "u8": torch.uint8, "i32": torch.int32, "i64": torch.int64}


class ProblemError(Exception):
    pass


class Unfollowed(Exception):
    """an output dimension follows variable j in a way a shape expression cannot say"""
    def __init__(self, j):
        super().__init__(j)
        self.j = j


def cname(s):
    out = "".join(c if c.isalnum() or c == "_" else "_" for c in s)
    return out if out and not out[0].isdigit() else "_" + out


class Ref:
    def __init__(self):
        self.mm = mmap.mmap(3, 0)
        self.model = None

    def load(self, req):
        path = req["file"]
        spec = importlib.util.spec_from_file_location("kwb_problem_module", path)
        if spec is None:
            raise ProblemError("%s: not a Python file" % path)
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
        self.mod, self.file = mod, path
        self.device = torch.device(req.get("device", "cpu"))
        self.seed = int(req.get("seed", 0))
        if self.device.type == "cuda":
            torch.backends.cuda.matmul.allow_tf32 = False
            torch.backends.cudnn.allow_tf32 = False
        for name in ("get_inputs",):
            if not callable(getattr(mod, name, None)):
                raise ProblemError("%s: defines no %s()" % (path, name))
        fn = req.get("fn")
        torch.manual_seed(self.seed)
        if fn:
            f = getattr(mod, fn, None)
            if not callable(f):
                raise ProblemError("%s: defines no function %s" % (path, fn))
            self.model = f
            self.weights = []
            self.forward = f
        else:
            cls = getattr(mod, "Model", None)
            if not isinstance(cls, type) or not issubclass(cls, torch.nn.Module):
                raise ProblemError("%s: defines no class Model(nn.Module) (or name a plain function: fn = NAME)" % path)
            init = getattr(mod, "get_init_inputs", lambda: [])()
            self.model = cls(*init).eval()
            self.redraw_constants()
            self.model = self.model.to(self.device)
            self.forward = self.model.forward
            self.weights = [(cname(k), k, v) for k, v in self.model.state_dict().items()]
        self.precision = req.get("precision", "f64")
        self.example = None
        return {}

    # A parameter or buffer whose elements are all one value (a bias of
    # zeros, a norm's weight of ones) is drawn again around that value,
    # keeping its sign: a zero initialisation can make a reference constant.
    def redraw_constants(self):
        gen = torch.Generator().manual_seed(self.seed ^ 0x6B7762)
        with torch.no_grad():
            for t in list(self.model.parameters()) + list(self.model.buffers()):
                if not t.is_floating_point() or t.numel() == 0:
                    continue
                flat = t.reshape(-1)
                if bool((flat == flat[0]).all()):
                    v = float(flat[0])
                    if v == 0:
                        noise = torch.rand(t.shape, generator=gen) * 0.2 - 0.1
                    else:
                        noise = v * (torch.rand(t.shape, generator=gen) * 0.2 + 0.9) - v
                    t.add_(noise.to(t.dtype))

    def example_inputs(self):
        torch.manual_seed(self.seed)
        got = self.mod.get_inputs()
        if not isinstance(got, (list, tuple)):
            raise ProblemError("%s: get_inputs() returns %s, not a list" % (self.file, type(got).__name__))
        return list(got)

    def arg_names(self, n):
        try:
            params = [p for p in inspect.signature(self.forward).parameters.values()
                      if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
        except (TypeError, ValueError):
            params = []
        names = [cname(p.name) for p in params][:n]
        while len(names) < n:
            names.append("in%d" % len(names))
        return names

    def run(self, inputs, weights=None):
        with torch.no_grad():
            if weights is not None and self.weights:
                return call_with(self.model, weights, inputs)
            return self.model(*inputs)

    # -- probing ----------------------------------------------------------
    def probe(self, _req):
        ex = self.example_inputs()
        names = self.arg_names(len(ex))
        tensors = [(i, names[i], t) for i, t in enumerate(ex) if isinstance(t, torch.Tensor)]
        consts = []
        for i, v in enumerate(ex):
            if not isinstance(v, torch.Tensor):
                try:
                    json.dumps(v)
                except TypeError:
                    raise ProblemError("%s: get_inputs()'s argument %d is a %s: kwb takes tensors and plain values"
                                       % (self.file, i, type(v).__name__))
                consts.append({"index": i, "value": v, "name": names[i]})
        for _, n, t in tensors:
            if t.dtype not in DTYPES:
                raise ProblemError("%s: input %s is %s, a dtype kwb does not take" % (self.file, n, t.dtype))
        outs = self.outputs_of(self.run([t.to(self.device) if isinstance(t, torch.Tensor) else t for t in ex]))
        base = {(i, d): t.shape[d] for i, _, t in tensors for d in range(t.dim())}
        vars_, dim_var = self.find_vars(ex, tensors, base)
        # each output dimension as an expression over the variables; a
        # variable an output follows otherwise (a convolution's H - 2) stays fixed
        while True:
            try:
                out_dims = self.output_dims(ex, tensors, vars_, outs)
                break
            except Unfollowed as u:
                gone = vars_.pop(u.j)
                for k in gone["keys"]:
                    del dim_var[k]
        spec = {
            "vars": [{"name": v["name"], "value": v["value"]} for v in vars_],
            "inputs": [{"name": n, "index": i, "dtype": DTYPES[t.dtype],
                        "dims": [dim_var.get((i, d), t.shape[d]) for d in range(t.dim())],
                        "init": init_of(t)} for i, n, t in tensors],
            "consts": consts,
            "weights": [{"name": n, "param": k, "dtype": DTYPES[v.dtype], "dims": list(v.shape)}
                        for n, k, v in self.weights],
            "outputs": [{"name": "out" if len(outs) == 1 else "out%d" % j, "dtype": DTYPES[o.dtype],
                         "dims": out_dims[j], "scale": scale(o)} for j, o in enumerate(outs)],
        }
        names_seen = {}
        for group in ("vars", "inputs", "weights", "outputs"):
            for e in spec[group]:
                if e["name"] in names_seen:
                    e["name"] = e["name"] + "_" + group[0]
                names_seen[e["name"]] = True
        return {"spec": spec}

    def outputs_of(self, out):
        if isinstance(out, torch.Tensor):
            outs = [out]
        elif isinstance(out, (list, tuple)) and out and all(isinstance(o, torch.Tensor) for o in out):
            outs = list(out)
        else:
            raise ProblemError("%s: forward returns %s; kwb takes a tensor or a tuple of tensors"
                               % (self.file, type(out).__name__))
        for o in outs:
            if o.dtype not in DTYPES:
                raise ProblemError("%s: forward returns a %s tensor, a dtype kwb does not take" % (self.file, o.dtype))
        return outs

    def trial(self, ex, tensors, sizes):
        """forward on fresh inputs with the dimensions in sizes changed -> outputs or None"""
        args = list(ex)
        for i, _, t in tensors:
            shape = [sizes.get((i, d), t.shape[d]) for d in range(t.dim())]
            args[i] = like(t, shape).to(self.device)
        for i, v in enumerate(args):
            if not isinstance(v, torch.Tensor):
                args[i] = v
        try:
            return self.outputs_of(self.run(args))
        except ProblemError:
            raise
        except Exception:
            return None

    def find_vars(self, ex, tensors, base):
        """dimensions that may vary: alone, or tied to the others of their size"""
        names = module_ints(self.mod)
        groups = {}
        for key, s in base.items():
            groups.setdefault(s, []).append(key)
        vars_, dim_var, used = [], {}, set()

        def new_var(keys, size):
            name = None
            for n, v in names:
                if v == size and n not in used:
                    name = n
                    break
            if name is None:
                name = "%s_%d" % (dict((j, n) for j, n, _ in tensors)[keys[0][0]], keys[0][1])
            used.add(name)
            vars_.append({"name": name, "value": size, "keys": keys})
            for k in keys:
                dim_var[k] = name

        for size in sorted(groups):
            keys = sorted(groups[size])
            if size < 2:
                continue
            smaller = size // 2
            alone = [k for k in keys if self.trial(ex, tensors, {k: smaller}) is not None]
            for k in alone:
                new_var([k], size)
            rest = [k for k in keys if k not in alone]
            if len(rest) > 1 and self.trial(ex, tensors, {k: smaller for k in rest}) is not None:
                new_var(rest, size)
        # in the order the inputs first show them (A[M, K], B[K, N]: M, K, N)
        vars_.sort(key=lambda v: min(v["keys"]))
        # every variable changed at once, each its own way: where that fails,
        # the variables are dropped from the last until it works
        while vars_:
            sizes = {}
            for j, v in enumerate(vars_):
                for k in v["keys"]:
                    sizes[k] = max(1, v["value"] // 2 - j % 3)
            if self.trial(ex, tensors, sizes) is not None:
                break
            gone = vars_.pop()
            for k in gone["keys"]:
                del dim_var[k]
        return vars_, dim_var

    def output_dims(self, ex, tensors, vars_, outs):
        def sized(changes):
            sizes = {}
            for j, v in enumerate(vars_):
                for k in v["keys"]:
                    sizes[k] = changes.get(j, v["value"])
            got = self.trial(ex, tensors, sizes)
            if got is None or len(got) != len(outs):
                raise ProblemError("%s: forward fails on a shape its variables allow" % self.file)
            return got
        probes = []
        for j, v in enumerate(vars_):
            half = max(1, v["value"] // 2)
            probes.append((j, half, sized({j: half})))
        dims = []
        for o_i, o in enumerate(outs):
            ds = []
            for d, n in enumerate(o.shape):
                expr, coef = [], n
                for j, half, got in probes:
                    m = got[o_i].shape[d] if got[o_i].dim() == o.dim() else None
                    if m is None:
                        raise ProblemError("%s: the output's rank changes with %s" % (self.file, vars_[j]["name"]))
                    if m == n:
                        continue
                    v = vars_[j]["value"]
                    if n % v == 0 and m == (n // v) * half:
                        expr.append(vars_[j]["name"])
                        coef //= v
                    else:
                        raise Unfollowed(j)
                if not expr:
                    ds.append(n)
                else:
                    ds.append("*".join(([str(coef)] if coef != 1 else []) + expr))
            dims.append(ds)
        return dims

    # -- calls ------------------------------------------------------------
    def tensor_at(self, dtype, shape, offset):
        n = math.prod(shape)
        t = torch.frombuffer(self.mm, dtype=TORCH_OF[dtype], count=n, offset=offset) if n else torch.empty(0, dtype=TORCH_OF[dtype])
        return t.reshape(shape)

    # (from the module as loaded, in its own dtypes: after the first call
    # self.model is the float64 copy the reference computes with)
    def weights_out(self, req):
        state = getattr(self, "own", self.model).state_dict()
        key = dict((n, k) for n, k, _ in self.weights)
        for name, offset in req["at"]:
            k = key[name]
            v = state[k].detach().contiguous().cpu()
            self.tensor_at(DTYPES[v.dtype], list(v.shape), offset).copy_(v.view(TORCH_OF[DTYPES[v.dtype]]) if v.dtype == torch.bool else v)
        return {}

    def call(self, req):
        ex = self.example_inputs() if self.example is None else self.example
        self.example = ex
        spec = req["spec"]
        at = req["at"]
        dims = req["dims"]
        args = list(ex)
        exact = self.precision == "f64"
        for e in spec["inputs"]:
            t = self.tensor_at(e["dtype"], shape_of(e["dims"], dims), at[e["name"]]).clone().to(self.device)
            args[e["index"]] = t.double() if exact and t.is_floating_point() else t
        weights = None
        if spec["weights"]:
            weights = {}
            for e in spec["weights"]:
                t = self.tensor_at(e["dtype"], shape_of(e["dims"], dims), at[e["name"]]).clone().to(self.device)
                weights[e["param"]] = t.double() if exact and t.is_floating_point() else t
        if exact:
            self.model_double()
        out = self.outputs_of(self.run(args, weights if weights is not None else None))
        if len(out) != len(spec["outputs"]):
            raise ProblemError("forward returned %d outputs, the problem has %d" % (len(out), len(spec["outputs"])))
        for o, e in zip(out, spec["outputs"]):
            want = shape_of(e["dims"], dims)
            if list(o.shape) != want:
                raise ProblemError("forward returned %s of shape %s where the problem says %s"
                                   % (e["name"], list(o.shape), want))
            if exact and o.is_floating_point():
                o = o.to(TORCH_OF[e["dtype"]])
            if DTYPES[o.dtype] != e["dtype"]:
                raise ProblemError("forward returned %s as %s where the problem says %s" % (e["name"], DTYPES[o.dtype], e["dtype"]))
            # (kwb compares finite elements only: one NaN or Inf expected
            # would fail every kernel, so it is the problem's error, named)
            if o.is_floating_point() and not bool(torch.isfinite(o).all()):
                off = (~torch.isfinite(o)).reshape(-1)
                raise ProblemError("forward returned %d NaN or Inf elements in %s (the first %s[%d]): kwb compares "
                                   "finite outputs only; give get_inputs() inputs the module is defined on"
                                   % (int(off.sum()), e["name"], e["name"], int(off.nonzero()[0]) + 1))
            o = o.contiguous().cpu()
            if o.dtype == torch.bool:
                o = o.to(torch.uint8)
            self.tensor_at(e["dtype"], want, at[e["name"]]).copy_(o)
        return {}

    def model_double(self):
        if getattr(self, "doubled", False) or not isinstance(self.model, torch.nn.Module):
            return
        import copy
        self.own = copy.deepcopy(self.model)   # (the module as it is, for the baselines' timing)
        self.model = self.model.double()
        self.doubled = True

    def time(self, req):
        spec, dims, mode = req["spec"], req["dims"], req["mode"]
        model = getattr(self, "own", self.model)
        args = list(self.example_inputs() if self.example is None else self.example)
        self.example = args
        gen = torch.Generator().manual_seed(int(req.get("seed", 0)))
        for e in spec["inputs"]:
            shape = shape_of(e["dims"], dims)
            init = e.get("init") or ["normal", 0, 1]
            if init[0] == "normal":
                x = torch.randn(shape, generator=gen) * init[2] + init[1]
            elif e["dtype"] in ("f32", "f64", "f16", "bf16"):
                x = torch.rand(shape, generator=gen) * (init[2] - init[1]) + init[1]
            else:
                x = torch.randint(int(init[1]), int(init[2]) + 1, shape, generator=gen)
            args[e["index"]] = x.to(TORCH_OF[e["dtype"]]).to(self.device)
        fn = model
        if req.get("package"):   # an op kwb exported (kwb export --torch) in place of forward: the timer's own check
            import copy
            import importlib
            sys.path.insert(0, os.path.dirname(req["package"]))
            pkg = importlib.import_module(os.path.basename(req["package"]))
            fn = pkg.patch(copy.deepcopy(model))
        if mode == "compile":
            if not hasattr(torch, "compile"):
                return {"skipped": "torch.compile is not in PyTorch %s" % torch.__version__}
            try:
                fn = torch.compile(model)
                with torch.no_grad():
                    fn(*args)
            except Exception as e:
                return {"skipped": "torch.compile failed: %s: %s" % (type(e).__name__, str(e).split("\n")[0][:200])}
        target, least, most = float(req.get("target", 0.2)), int(req.get("min_samples", 10)), int(req.get("max_samples", 1000))
        samples = []
        with torch.no_grad():
            if self.device.type != "cuda":
                if mode != "eager":
                    return {"skipped": "%s runs on the GPU only" % mode}
                threads = torch.get_num_threads()
                torch.set_num_threads(1)
                try:
                    import time
                    fn(*args)
                    total = 0.0
                    while len(samples) < least or (total < target and len(samples) < most):
                        t0 = time.thread_time()
                        fn(*args)
                        samples.append(time.thread_time() - t0)
                        total += samples[-1]
                finally:
                    torch.set_num_threads(threads)
                return {"samples": samples}
            call = lambda: fn(*args)
            for _ in range(3):
                call()
            torch.cuda.synchronize()
            if mode in ("graph", "compile"):
                try:
                    stream = torch.cuda.Stream()
                    stream.wait_stream(torch.cuda.current_stream())
                    with torch.cuda.stream(stream):
                        for _ in range(2):
                            call()
                    torch.cuda.current_stream().wait_stream(stream)
                    graph = torch.cuda.CUDAGraph()
                    with torch.cuda.graph(graph):
                        call()
                    call = graph.replay
                except Exception as e:
                    if mode == "graph":
                        return {"skipped": "no CUDA graph of it: %s: %s" % (type(e).__name__, str(e).split("\n")[0][:200])}
            props = torch.cuda.get_device_properties(self.device)
            l2 = getattr(props, "L2_cache_size", 0) or (64 << 20)
            flush = torch.empty(2 * l2, dtype=torch.uint8, device=self.device)
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            total = 0.0
            while len(samples) < least or (total < target and len(samples) < most):
                flush.zero_()
                start.record()
                call()
                end.record()
                end.synchronize()
                samples.append(start.elapsed_time(end) / 1000.0)
                total += samples[-1]
        return {"samples": samples}

    def remap(self, _req):
        self.mm.close()
        self.mm = mmap.mmap(3, 0)
        return {}


def call_with(model, weights, inputs):
    try:
        from torch.func import functional_call
    except ImportError:
        from torch.nn.utils.stateless import functional_call
    return functional_call(model, weights, tuple(inputs))


def shape_of(dims, values):
    out = []
    for d in dims:
        if isinstance(d, int):
            out.append(d)
        else:
            n = 1
            for part in d.split("*"):
                n *= int(part) if part.isdigit() else int(values[part])
            out.append(n)
    return out


def like(t, shape):
    if t.is_floating_point():
        x = torch.randn(shape, dtype=torch.float32)
        if bool((t >= 0).all()):
            x = torch.rand(shape, dtype=torch.float32)
        return x.to(t.dtype)
    lo, hi = (int(t.min()), int(t.max())) if t.numel() else (0, 1)
    return torch.randint(lo, hi + 1, shape, dtype=torch.int64).to(t.dtype)


def init_of(t):
    """how kwb draws an input like the file's example, at the example's own offset and scale (a
    kernel right only on a narrower range, or a tolerance scaled by a larger output than kwb's
    inputs give, would pass otherwise): uniform over the range it spans, rounded outwards at a
    tenth of its width's order, where it is bounded like one (a range under 3.6 standard
    deviations: torch.rand is [0, 1)) or has no negative element where a normal like it would
    (torch.randn().abs()); else normal, its standard deviation snapped to the nearest of SCALES
    and its mean to a tenth of that one's leading digit's place, 0 where within 3 standard
    errors of it (torch.randn * 10 + 5: normal(5, 10)); an integer input: the integers it spans"""
    if not t.is_floating_point():
        if t.numel() == 0:
            return ["uniform", 0, 1]
        return ["uniform", int(t.min()), int(t.max())]
    x = t.detach().double().reshape(-1).cpu()
    x = x[torch.isfinite(x)]
    if x.numel() < 2 or float(x.max()) == float(x.min()):
        return ["uniform", 0, 1] if not x.numel() or float(x.min()) >= 0 else ["normal", 0, 1]
    lo, hi, mean, std = float(x.min()), float(x.max()), float(x.mean()), float(x.std())
    unit = 10.0 ** math.floor(math.log10(std))
    sd = min((k * unit for k in SCALES), key=lambda v: abs(math.log(v / std)))
    unit = 10.0 ** math.floor(math.log10(sd) + 1e-9)
    m = 0 if abs(mean) < 3 * std / math.sqrt(x.numel()) else nice(round(mean / unit * 10) * unit / 10)
    if hi - lo < 3.6 * std or (lo >= 0 and m - 4 * sd < 0):
        step = 10.0 ** (math.floor(math.log10(hi - lo)) - 1)
        return ["uniform", nice(math.floor(lo / step) * step), nice(math.ceil(hi / step) * step)]
    return ["normal", m, nice(sd)]


# the standard deviations an input is drawn with, times a power of ten: an
# example's (a sample's, n of them) is snapped to the nearest, so randn's
# 0.94 is 1 and randn * 10's 10.3 is 10
SCALES = (1, 1.5, 2, 2.5, 3, 4, 5, 6, 8, 10)


def nice(v):
    """v without the float noise of its rounding (0.30000000000000004: 0.3), a whole number as an int"""
    v = float("%.12g" % v)
    return int(v) if v == int(v) else v


def scale(o):
    """an output's typical magnitude, which the absolute tolerance is a part of: its RMS, or
    the median magnitude of its nonzero elements where that is smaller (a few large elements,
    exp's tail, make the RMS hundreds of times most elements: a tolerance scaled by it would
    let those go uncomputed); 0 for an integer output"""
    if not o.is_floating_point() or o.numel() == 0:
        return 0
    a = o.detach().double().abs().reshape(-1).cpu()
    a = a[torch.isfinite(a)]
    if a.numel() == 0:
        return 0
    r = float(a.pow(2).mean().sqrt())
    nonzero = a[a > 0]
    return min(r, float(nonzero.median())) if nonzero.numel() else r


def module_ints(mod):
    """the file's module-level integers in the order it defines them: the names its shapes have"""
    return [(k, v) for k, v in vars(mod).items()
            if isinstance(v, int) and not isinstance(v, bool) and not k.startswith("_")]


def main():
    ref = Ref()
    ops = {"load": ref.load, "probe": ref.probe, "weights": ref.weights_out, "call": ref.call, "map": ref.remap,
           "time": ref.time}
    print(json.dumps({"ok": True, "torch": torch.__version__, "python": sys.executable,
                      "cuda": torch.cuda.is_available()}), flush=True)
    for line in sys.stdin:
        try:
            req = json.loads(line)
            op = ops.get(req.get("op"))
            if op is None:
                raise ProblemError("unknown request %r" % req.get("op"))
            ans = op(req)
            ans["ok"] = True
        except ProblemError as e:
            ans = {"ok": False, "error": str(e)}
        except Exception as e:
            tb = traceback.extract_tb(e.__traceback__)
            where = ""
            for fr in reversed(tb):
                if fr.filename == getattr(ref, "file", None):
                    where = "%s:%d: " % (fr.filename, fr.lineno)
                    break
            ans = {"ok": False, "error": "%s%s: %s" % (where, type(e).__name__, e)}
        sys.stdout.write(json.dumps(ans) + "\n")
        sys.stdout.flush()


if __name__ == "__main__":
    main()
