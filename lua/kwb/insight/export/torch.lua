-- kwb/insight/export/torch.lua: `kwb export RECIPE DIR --torch`: the export
-- of a recipe whose problem is a PyTorch module's (kwb.problems.torch) as a
-- Python package that registers a torch.library op launching the chosen
-- kernel (on the current stream, CUDA), with an end-to-end check that
-- replaces the module's forward with it and compares with eager. Written
-- beside the C export (kwb.insight.export), from its dispatcher:
--   DIR/torch/<R>_kwb/__init__.py   the op torch.ops.kwb_<R>.<R>, op(), patch(model)
--   DIR/torch/<R>_kwb/lib<R>.so     the dispatcher and its kernels, built now: no
--                                   compiler is needed where the package is imported
--   DIR/torch/model.py              the module's file, as measured
--   DIR/torch/check.py              python3 DIR/torch/check.py: every measured shape
--                                   on fresh inputs, exit 1 on a mismatch
local cjson = require "cjson"
local core = require "kwb.core"
local files = require "kwb.base.files"

local M = {}

local write = require("kwb.insight.export.c").write

local function sh(cmd)
  local r = core.exec({ "sh", "-c", cmd }, { timeout = 600 })
  if not r or r.status ~= 0 then
    error(string.format("building the op's library failed: %s\n%s%s", cmd, r and r.out or "", r and r.err or ""), 0)
  end
end

local function q(s) return "'" .. s:gsub("'", "'\\''") .. "'" end

-- The shared library: the C export's objects built position-independent
-- (its own Makefile, as kwb measured the kernels), then linked into one .so.
function M.build(dir, out, cuda)
  local name = out.dispatcher
  sh(string.format("make -s -C %s CFLAGS='-O2 -fPIC' lib%s.a", q(dir), name))
  local objs = { q(dir .. "/dispatch.o") }
  if not cuda then
    local seen = {}
    for _, k in pairs(out.kernels) do
      local o = dir .. "/" .. k.file:gsub("%.c$", ".o")
      if not seen[o] then seen[o] = true; objs[#objs + 1] = q(o) end
    end
    table.sort(objs)
  end
  local libs = cuda and "-lcuda -lpthread" or "-lm"
  -- (the toolkit's stub for the link: libcuda.so.1, its soname, is the driver's where it runs)
  local stub = io.open("/usr/local/cuda/lib64/stubs/libcuda.so")
  if cuda and stub then stub:close(); libs = "-L/usr/local/cuda/lib64/stubs " .. libs end
  sh(string.format("cc -shared -o %s %s %s", q(dir .. "/torch/" .. name .. "_kwb/lib" .. name .. ".so"),
                   table.concat(objs, " "), libs))
end

local init_py = [==[
"""NAME_kwb: what kwb chose for each measured shape of recipe RECIPE (problem PROBLEM,
measured on DEVICE), as a PyTorch op.

    import NAME_kwb
    y = NAME_kwb.op(INPUTS)        # torch.ops.kwb_NAME.NAME
    NAME_kwb.patch(model)          # model.forward(*inputs) runs the op with the model's own weights

The kernels are in libNAME.so beside this file, built by kwb export: nothing is compiled
here. Tensors are taken as the spec below says (dtype, rank; contiguous copies where they
are not); the sizes that vary are read off the inputs.
"""
import ctypes
import json
import os

import torch

SPEC = json.loads(r'''SPECJSON''')
ON = "BACKEND"
SHAPES = json.loads(r'''SHAPESJSON''')
_DT = {"f32": torch.float32, "f64": torch.float64, "f16": torch.float16, "bf16": torch.bfloat16,
       "i8": torch.int8, "u8": torch.uint8, "i32": torch.int32, "i64": torch.int64}
_TAKEN = SPEC["inputs"] + SPEC["weights"]
_VARS = [v["name"] for v in SPEC["vars"]]

_lib = ctypes.CDLL(os.path.join(os.path.dirname(os.path.abspath(__file__)), "libNAME.so"))
_fn = _lib.NAME
_fn.argtypes = ([ctypes.c_longlong] * len(_VARS) + [ctypes.c_int] * len(_VARS)
                + [ctypes.c_void_p] * (len(_TAKEN) + len(SPEC["outputs"]))
                + ([ctypes.c_void_p] if ON == "cuda" else []))
_fn.restype = ctypes.c_int if ON == "cuda" else None


def _size(d, vals):
    if isinstance(d, int):
        return d
    n = 1
    for part in d.split("*"):
        n *= int(part) if part.isdigit() else vals[part]
    return n


def _impl(*tensors):
    if len(tensors) != len(_TAKEN):
        raise TypeError("NAME takes %d tensors (%s), got %d" % (len(_TAKEN), ", ".join(e["name"] for e in _TAKEN), len(tensors)))
    vals, device = {}, tensors[0].device if tensors else torch.device("cpu")
    for e, t in zip(_TAKEN, tensors):
        if t.dtype != _DT[e["dtype"]]:
            raise TypeError("NAME: %s is %s, the kernel takes %s" % (e["name"], t.dtype, _DT[e["dtype"]]))
        if t.dim() != len(e["dims"]):
            raise ValueError("NAME: %s has %d dimensions, the kernel takes %d" % (e["name"], t.dim(), len(e["dims"])))
        if t.device != device:
            raise ValueError("NAME: %s is on %s, %s on %s" % (e["name"], t.device, _TAKEN[0]["name"], device))
        for i, (d, n) in enumerate(zip(e["dims"], t.shape)):
            if isinstance(d, str) and d in _VARS:
                if vals.setdefault(d, n) != n:
                    raise ValueError("NAME: %s's dimension %d is %d where %s is %d" % (e["name"], i, n, d, vals[d]))
    for v in _VARS:
        if v not in vals:
            raise ValueError("NAME: no input gives %s" % v)
    for e, t in zip(_TAKEN, tensors):
        want = [_size(d, vals) for d in e["dims"]]
        if list(t.shape) != want:
            raise ValueError("NAME: %s is %s, the kernel takes %s" % (e["name"], list(t.shape), want))
    ins = [t.contiguous() for t in tensors]
    outs = [torch.empty([_size(d, vals) for d in o["dims"]], dtype=_DT[o["dtype"]], device=device)
            for o in SPEC["outputs"]]
    args = [vals[v] for v in _VARS] * 2 + [t.data_ptr() for t in ins] + [o.data_ptr() for o in outs]
    if ON == "cuda":
        rc = _fn(*args, ctypes.c_void_p(torch.cuda.current_stream(device).cuda_stream))
        if rc != 0:
            raise RuntimeError("NAME: the launch failed (CUresult %d; the CUDA dispatcher takes the measured shapes "
                               "only: %s)" % (rc, ", ".join(s["key"] for s in SHAPES)))
    else:
        _fn(*args)
    return outs[0] if len(outs) == 1 else tuple(outs)


_library = torch.library.Library("kwb_NAME", "DEF")
_library.define("NAME(%s) -> %s" % (", ".join("Tensor " + e["name"] for e in _TAKEN),
                                     "Tensor" if len(SPEC["outputs"]) == 1
                                     else "(" + ", ".join("Tensor" for _ in SPEC["outputs"]) + ")"))
_library.impl("NAME", _impl, "CUDA" if ON == "cuda" else "CPU")
op = torch.ops.kwb_NAME.NAME


def patch(model):
    """model.forward(*inputs) -> the op on the model's tensor inputs and its own weights"""
    state = model.state_dict()
    weights = [state[w["param"]] for w in SPEC["weights"]]

    def forward(*inputs):
        return op(*[inputs[e["index"]] for e in SPEC["inputs"]], *weights)
    model.forward = forward
    return model
]==]

local check_py = [==[
"""check.py: NAME_kwb end to end: the module's forward (model.py, as kwb measured it) replaced
by the op, compared with eager (computed in float64) on fresh inputs at every shape kwb
measured, at the problem's tolerance. One line a shape; exit 1 on a mismatch.
    python3 check.py [SEED]"""
import copy
import importlib.util
import os
import sys

import torch

here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, here)
import NAME_kwb as kernel  # noqa: E402

TOL = TOLJSON
SEED = int(sys.argv[1]) if len(sys.argv) > 1 else 1
DEV = torch.device("cuda" if kernel.ON == "cuda" else "cpu")
spec = importlib.util.spec_from_file_location("model", os.path.join(here, "model.py"))
mod = importlib.util.module_from_spec(spec)
spec.loader.exec_module(mod)
torch.manual_seed(SEED)
model = mod.Model(*mod.get_init_inputs()).eval()
with torch.no_grad():   # no constant weight (a bias of zeros) to hide a wrong read of it
    for t in list(model.parameters()) + list(model.buffers()):
        if t.is_floating_point() and t.numel() > 1 and bool((t == t.reshape(-1)[0]).all()):
            t.add_(torch.rand(t.shape) * 0.2 - 0.1 if float(t.reshape(-1)[0]) == 0 else t * (torch.rand(t.shape) * 0.2 - 0.1))
model = model.to(DEV)
eager = copy.deepcopy(model).double()
fast = kernel.patch(copy.deepcopy(model))
example = mod.get_inputs()
bad = 0
for shape in kernel.SHAPES:
    vals = shape["shape"]
    args = list(example)
    for e in kernel.SPEC["inputs"]:
        dims = [kernel._size(d, vals) for d in e["dims"]]
        kind = e.get("init", ["normal", 0, 1])
        if kind[0] == "normal":
            x = torch.randn(dims) * kind[2] + kind[1]
        elif e["dtype"] in ("f32", "f64", "f16", "bf16"):
            x = torch.rand(dims) * (kind[2] - kind[1]) + kind[1]
        else:
            x = torch.randint(int(kind[1]), int(kind[2]) + 1, dims)
        args[e["index"]] = x.to(kernel._DT[e["dtype"]]).to(DEV)
    with torch.no_grad():
        want = eager(*[a.double() if isinstance(a, torch.Tensor) and a.is_floating_point() else a for a in args])
        got = fast(*args)
    if DEV.type == "cuda":
        torch.cuda.synchronize()
    wants = list(want) if isinstance(want, (tuple, list)) else [want]
    gots = list(got) if isinstance(got, (tuple, list)) else [got]
    line = []
    for o, w, g in zip(kernel.SPEC["outputs"], wants, gots):
        w = w.to(g.dtype).double() if not g.is_floating_point() else w.double()
        g = g.double()
        err = (g - w).abs()
        if "rel_l2" in TOL:
            rel = float(err.pow(2).sum().sqrt() / w.pow(2).sum().sqrt().clamp_min(1e-300))
            ok = rel <= TOL["rel_l2"] and bool(torch.isfinite(g).all())
            line.append("%s %s rel_l2 %.3g" % (o["name"], "ok" if ok else "WRONG", rel))
        else:
            off = ~(err <= TOL["atol"] + TOL["rtol"] * w.abs())
            ok = not bool(off.any())
            line.append("%s %s max_abs %.3g%s" % (o["name"], "ok" if ok else "WRONG", float(err.max()) if err.numel() else 0,
                                                  "" if ok else " (%d of %d elements off)" % (int(off.sum()), off.numel())))
        bad += not ok
    print("%s %s" % (shape["key"], " ".join(line)))
sys.exit(1 if bad else 0)
]==]

-- check(recipe): raises unless the recipe's problem can be exported as an
-- op (before anything of the export is written).
function M.check(recipe)
  local t = recipe.problem.torch
  if not t then
    error(string.format("--torch: the problem of recipe %s is not a PyTorch module's (kwb.problems.torch)", recipe.name), 0)
  end
  if t.fn then error("--torch: the problem is a plain function of " .. t.file .. " (fn = " .. t.fn
                     .. "); the export patches a Model's forward", 0) end
  return t
end

-- write(recipe, dir, out): the package beside the C export `out` (its dispatch.json's object).
function M.write(recipe, dir, out)
  local t = M.check(recipe)
  local name = out.dispatcher
  local pkg = dir .. "/torch/" .. name .. "_kwb"
  for _, d in ipairs { dir .. "/torch", pkg } do
    local ok, why = core.output_dir(d)
    if not ok then error(why, 0) end
  end
  local cuda = recipe.backend == "cuda"
  local shapes = {}
  for i, s in ipairs(out.shapes) do shapes[i] = { key = s.key, shape = s.shape } end
  local tol = recipe.problem.tolerance
  local names = {}
  for _, e in ipairs(t.spec.inputs) do names[#names + 1] = e.name end
  for _, e in ipairs(t.spec.weights) do names[#names + 1] = e.name end
  -- (the words first, the JSON last: a name in the spec is never taken for a word)
  local words = {
    { "NAME", name }, { "BACKEND", cuda and "cuda" or "host" }, { "RECIPE", recipe.name },
    { "PROBLEM", recipe.problem:key() }, { "DEVICE", out.device }, { "INPUTS", table.concat(names, ", ") },
    { "TOLJSON", tol.rel_l2 and string.format("{\"rel_l2\": %.17g}", tol.rel_l2)
                 or string.format("{\"atol\": %.17g, \"rtol\": %.17g}", tol.atol, tol.rtol) },
    { "SPECJSON", require("kwb.problems.torch").spec_json(t.spec) }, { "SHAPESJSON", cjson.encode(shapes) },
  }
  local function fill(text)
    for _, w in ipairs(words) do text = text:gsub(w[1], function() return w[2] end) end
    return text
  end
  write(pkg .. "/__init__.py", fill(init_py))
  write(dir .. "/torch/check.py", fill(check_py))
  write(dir .. "/torch/model.py", assert(files.read_file(t.file)))
  M.build(dir, out, cuda)
  return { package = pkg, check = dir .. "/torch/check.py", op = "torch.ops.kwb_" .. name .. "." .. name }
end

return M
