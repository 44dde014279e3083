#!/usr/bin/env python3
"""kwb_start.py: a plain start kernel for a PyTorch problem in KernelBench's format.

    python3 kwb_start.py MODEL.py SPEC.json c|cuda [FN]   prints the kernel's source

MODEL.py defines `class Model(nn.Module)`, `get_inputs()` and `get_init_inputs()`. SPEC.json
describes the problem:
  vars     [{name, value}]                 shape variables and their example values
  inputs   [{name, dtype, dims}]           forward's tensor arguments in order (a dim: a var's
                                           name or an integer)
  consts   [{index, value}]                forward's other arguments (0-based position), baked in
  weights  [{name, param, dtype, dims}]    the module's state_dict entries (param: its key)
  outputs  [{name, dtype, dims}]           forward's result: one tensor or a tuple
dtypes f32 f64 f16 bf16 i8 u8 i32 i64. The kernel has exactly the spec's signature: every var
(int), every input and every weight (const pointers), every output (pointers), in that order;
f16 and bf16 as uint16_t bits (unsigned short in CUDA, which has no <stdint.h> under NVRTC).
FN defaults to the model file's name.

How: the module is traced with torch.fx (consts baked in), every node's dtype and shape are
recorded by running the traced graph once on inputs of the spec's example shapes, and every
node is translated to loops over index expressions in the spec's vars. Each value is bound to
a variable at the outermost loop where its indices are defined, so a row's max or sum is
computed once per row, not once per element.
  C:    a function; a node with a reduction, or used more than once, is computed into a
        malloc'd temporary (freed at the end), the rest is fused into its user's loops.
  CUDA: an `extern "C" __global__` kernel, one thread per element of the first output
        (guarded); a thread recomputes the reductions its element needs.
f16 and bf16 travel as raw uint16_t bits; they are computed in float and rounded (to nearest
even) after every node, as PyTorch does. Reductions accumulate in double.

Exit status: 0 with the source on stdout; 2 for a usage error or an op outside the supported
set ("kwb_start: no plain kernel for OP (node NAME); write a start kernel by hand"); 1 for a
model or spec that cannot be read (the message names the file and field).
Only torch and the standard library are used; the same code runs on PyTorch 1.13 and 2.x.
"""
import importlib.util
import inspect
import math
import operator
import os
import re
import struct
import sys
from fractions import Fraction

import torch
import torch.fx as fx
import torch.nn as nn
import torch.nn.functional as F


class StartError(Exception):
    """A model or spec that cannot be read: exit status 1."""


class Unsupported(Exception):
    """An op with no plain kernel here: exit status 2."""

    def __init__(self, op, node=None):
        where = " (node %s)" % node if node is not None else ""
        super().__init__("no plain kernel for %s%s; write a start kernel by hand" % (op, where))


# ---- the spec's dtypes -------------------------------------------------------------------
DTYPES = {"f32": torch.float32, "f64": torch.float64, "f16": torch.float16, "bf16": torch.bfloat16,
          "i8": torch.int8, "u8": torch.uint8, "i32": torch.int32, "i64": torch.int64}
DTYPE_NAME = {v: k for k, v in DTYPES.items()}
DTYPE_NAME[torch.bool] = "u8"
FLOATING = (torch.float32, torch.float64, torch.float16, torch.bfloat16)


# ---- the two languages -------------------------------------------------------------------
class Lang:
    """What differs between the C and the CUDA source: type names and a few spellings."""

    def __init__(self, name):
        self.name = name
        cuda = name == "cuda"
        self.idx = "long long" if cuda else "int64_t"
        self.storage = {"f32": "float", "f64": "double", "f16": "uint16_t", "bf16": "uint16_t",
                        "i8": "int8_t", "u8": "uint8_t", "i32": "int32_t", "i64": "int64_t"}
        if cuda:   # no headers: NVRTC has no <stdint.h>; these are the same types
            self.storage.update({"f16": "unsigned short", "bf16": "unsigned short", "i8": "signed char",
                                 "u8": "unsigned char", "i32": "int", "i64": "long long"})
        self.inf = "__int_as_float(0x7f800000)" if cuda else "INFINITY"
        self.inline = "static __device__ __forceinline__" if cuda else "static inline"
        self.u32 = "unsigned" if cuda else "uint32_t"
        self.u16 = "unsigned short" if cuda else "uint16_t"

    def compute(self, dtype):
        """The C type a value of this torch dtype is computed in."""
        if dtype in (torch.float32, torch.float16, torch.bfloat16):
            return "float"
        if dtype == torch.float64:
            return "double"
        if dtype == torch.int64:
            return self.idx
        return "int"


def helpers(lang, used):
    """The static inline conversions the kernel uses, in dependency order."""
    L = lang
    if L.name == "cuda":
        bits = ("%s %s bits_of(float f) { return __float_as_uint(f); }\n"
                "%s float float_of(%s u) { return __uint_as_float(u); }\n" % (L.inline, L.u32, L.inline, L.u32))
    else:
        bits = ("%s %s bits_of(float f) { union { float f; %s u; } c; c.f = f; return c.u; }\n"
                "%s float float_of(%s u) { union { %s u; float f; } c; c.u = u; return c.f; }\n"
                % (L.inline, L.u32, L.u32, L.inline, L.u32, L.u32))
    text = {
        "half_to_float": """\
/* IEEE half bits to float (exact). */
{I} float half_to_float({U16} h) {
    {U32} sign = ({U32})(h & 0x8000) << 16, e = (h >> 10) & 0x1f, m = h & 0x3ff;
    if (e == 0x1f) return float_of(sign | 0x7f800000u | (m << 13));
    if (e != 0) return float_of(sign | ((e + 112) << 23) | (m << 13));
    if (m == 0) return float_of(sign);
    e = 113;
    while (!(m & 0x400)) { m <<= 1; e--; }
    return float_of(sign | (e << 23) | ((m & 0x3ff) << 13));
}
""",
        "float_to_half": """\
/* float to IEEE half bits, rounded to nearest even. */
{I} {U16} float_to_half(float f) {
    {U32} x = bits_of(f), sign = (x >> 16) & 0x8000, m = x & 0x7fffff, h, rest, half;
    int e = (int)((x >> 23) & 0xff) - 112;
    if (((x >> 23) & 0xff) == 0xff) return ({U16})(sign | 0x7c00 | (m ? 0x200 : 0));
    if (e >= 31) return ({U16})(sign | 0x7c00);
    if (e <= 0) {
        if (e < -10) return ({U16})sign;
        m |= 0x800000;
        h = m >> (14 - e); rest = m & ((1u << (14 - e)) - 1); half = 1u << (13 - e);
    } else {
        h = (({U32})e << 10) | (m >> 13); rest = m & 0x1fff; half = 0x1000;
    }
    if (rest > half || (rest == half && (h & 1))) h++;
    return ({U16})(sign | h);
}
""",
        "bf16_to_float": """\
/* bfloat16 bits to float (exact). */
{I} float bf16_to_float({U16} b) { return float_of(({U32})b << 16); }
""",
        "float_to_bf16": """\
/* float to bfloat16 bits, rounded to nearest even; a NaN stays a NaN. */
{I} {U16} float_to_bf16(float f) {
    {U32} x = bits_of(f);
    if ((x & 0x7fffffff) > 0x7f800000) return ({U16})((x >> 16) | 0x40);
    return ({U16})((x + 0x7fff + ((x >> 16) & 1)) >> 16);
}
""",
        "round_half": """\
{I} float round_half(float f) { return half_to_float(float_to_half(f)); }
""",
        "round_bf16": """\
{I} float round_bf16(float f) { return bf16_to_float(float_to_bf16(f)); }
""",
    }
    needs = {"round_half": ("half_to_float", "float_to_half"), "round_bf16": ("bf16_to_float", "float_to_bf16")}
    want = set(used)
    for k in list(want):
        want.update(needs.get(k, ()))
    if not want:
        return ""
    out = [bits]
    for k in ("half_to_float", "float_to_half", "bf16_to_float", "float_to_bf16", "round_half", "round_bf16"):
        if k in want:
            out.append(text[k].replace("{I}", L.inline).replace("{U16}", L.u16).replace("{U32}", L.u32))
    return "".join(out)


# ---- symbolic dims -----------------------------------------------------------------------
class Dim:
    """A dimension: a rational coefficient times a product of shape variables."""
    __slots__ = ("coef", "vars")

    def __init__(self, coef=1, vars=()):
        self.coef = Fraction(coef)
        self.vars = tuple(sorted(vars))

    @staticmethod
    def of(x):
        if isinstance(x, Dim):
            return x
        if isinstance(x, bool) or not isinstance(x, int):
            raise StartError("a dimension must be an integer, not %r" % (x,))
        return Dim(x)

    def __mul__(self, o):
        o = Dim.of(o)
        return Dim(self.coef * o.coef, self.vars + o.vars)

    def exact_div(self, o):
        o = Dim.of(o)
        rest = list(self.vars)
        for v in o.vars:
            if v not in rest:
                return None
            rest.remove(v)
        if o.coef == 0:
            return None
        return Dim(self.coef / o.coef, rest)

    def __eq__(self, o):
        return isinstance(o, Dim) and self.coef == o.coef and self.vars == o.vars

    def __hash__(self):
        return hash((self.coef, self.vars))

    def is_one(self):
        return self.coef == 1 and not self.vars

    def const(self):
        return int(self.coef) if not self.vars and self.coef.denominator == 1 else None

    def value(self, env):
        v = self.coef
        for n in self.vars:
            v *= env[n]
        return v

    def c(self, lang):
        """The dimension as a C expression (a product of several vars in the index type)."""
        if not self.vars:
            if self.coef.denominator != 1:
                raise StartError("dimension %s is not an integer" % self)
            return str(int(self.coef))
        parts = list(self.vars)
        if self.coef.numerator != 1:
            parts.insert(0, str(self.coef.numerator))
        s = "*".join(parts)
        if len(parts) > 1:
            s = "(%s)%s" % (lang.idx, s)
        if self.coef.denominator != 1:
            s = "%s / %d" % (s, self.coef.denominator)
        return s if len(parts) == 1 and self.coef.denominator == 1 else "(%s)" % s

    def __repr__(self):
        s = "*".join(self.vars)
        if not self.vars:
            return str(self.coef)
        return s if self.coef == 1 else "%s*%s" % (self.coef, s)


def numel(shape):
    n = Dim(1)
    for d in shape:
        n = n * d
    return n


def broadcast(a, b, where):
    out = []
    for k in range(max(len(a), len(b))):
        x = a[len(a) - 1 - k] if k < len(a) else Dim(1)
        y = b[len(b) - 1 - k] if k < len(b) else Dim(1)
        if x == y or y.is_one():
            out.append(x)
        elif x.is_one():
            out.append(y)
        else:
            raise StartError("node %s: cannot broadcast shapes %s and %s" % (where, list(a), list(b)))
    return out[::-1]


# ---- code: expressions, scopes, the emitter ----------------------------------------------
class E:
    """A C expression with the index variables it depends on and its C type."""
    __slots__ = ("e", "deps", "ct")

    def __init__(self, e, deps=frozenset(), ct=None):
        self.e, self.deps, self.ct = e, frozenset(deps), ct


ZERO = E("0")
SIMPLE = re.compile(r"^[A-Za-z_][A-Za-z_0-9]*$|^\(?-?[0-9][0-9.e+\-]*f?\)?$")


class Decl:
    """A declaration the renderer drops when nothing reads it (a thread's index of one dim)."""

    def __init__(self, name, text):
        self.name, self.text = name, text


class Scope:
    """A block: the function's body or a loop's, with the names its loop defines."""

    def __init__(self, header=None, defines=()):
        self.header, self.defines, self.body, self.memo = header, set(defines), [], {}


class Emitter:
    def __init__(self, lang, reserved):
        self.lang = lang
        self.stack = [Scope()]
        self.reserved = set(reserved)
        self.counter = 0
        self.used = set()   # helper functions

    def fresh(self, base):
        while True:
            self.counter += 1
            name = "%s%d" % (base, self.counter)
            if name not in self.reserved:
                return name

    def target(self, deps):
        for k in range(len(self.stack) - 1, 0, -1):
            if self.stack[k].defines & deps:
                return k
        return 0

    def lookup(self, key):
        for s in reversed(self.stack):
            if key in s.memo:
                return s.memo[key]
        return None

    def bind(self, e, key=None, base="v"):
        """Declare e in the outermost scope where its indices are defined; returns the name."""
        k = self.target(e.deps)
        if SIMPLE.match(e.e):
            if key is not None:
                self.stack[k].memo[key] = e
            return e
        name = self.fresh(base)
        self.stack[k].body.append("%s %s = %s;" % (e.ct, name, e.e))
        out = E(name, e.deps, e.ct)
        if key is not None:
            self.stack[k].memo[key] = out
        return out

    def value(self, t, idx):
        """Tensor t's element at idx (a list of E, one per dim of t)."""
        key = (t.key, tuple(i.e for i in idx))
        hit = self.lookup(key)
        if hit is not None:
            return hit
        if t.buf is not None:   # computed into a temporary already
            e = E("%s[%s]" % (t.buf, flat(idx, t.shape, self.lang)), union(idx), t.ct)
        else:
            e = t.emit(self, idx)
        return self.bind(e, key)

    def reduce(self, deps, sizes, acc_decl, body):
        """A loop nest over sizes placed where deps are defined: acc_decl lines before it,
        body(rvars) -> the lines inside it."""
        k = self.target(deps)
        saved = self.stack
        self.stack = saved[:k + 1]
        self.stack[-1].body.extend(acc_decl)
        rvars = []
        for size in sizes:
            r = self.fresh("r")
            self.stack.append(Scope("for (%s %s = 0; %s < %s; %s++)" % (self.lang.idx, r, r, size.c(self.lang), r), {r}))
            rvars.append(E(r, {r}, self.lang.idx))
        self.stack[-1].body.extend(body(rvars))
        while len(self.stack) > k + 1:
            s = self.stack.pop()
            self.stack[-1].body.append(s)
        self.stack = saved

    def open_loops(self, dims):
        """Loops over dims (none for a dim of literal size 1: its index is 0)."""
        idx = []
        for d in dims:
            if d.is_one():
                idx.append(ZERO)
                continue
            i = self.fresh("i")
            self.stack.append(Scope("for (%s %s = 0; %s < %s; %s++)" % (self.lang.idx, i, i, d.c(self.lang), i), {i}))
            idx.append(E(i, {i}, self.lang.idx))
        return idx

    def close_loops(self, idx):
        for _ in range(sum(1 for i in idx if i is not ZERO)):
            s = self.stack.pop()
            self.stack[-1].body.append(s)


def union(es):
    deps = set()
    for e in es:
        deps |= e.deps
    return frozenset(deps)


def flat(idx, shape, lang):
    """Row-major offset of idx in a contiguous tensor of this shape."""
    acc = None
    for i, d in zip(idx, shape):
        if d.is_one():   # its index is 0
            continue
        if acc is None:
            acc = i.e
        elif acc == "0":
            acc = i.e
        else:
            a = acc if SIMPLE.match(acc) else "(%s)" % acc
            acc = "%s * %s" % (a, d.c(lang)) if i.e == "0" else "%s * %s + %s" % (a, d.c(lang), i.e)
    return acc if acc is not None else "0"


def render(scope, indent, out):
    for item in scope.body:
        if isinstance(item, Scope):
            out.append("%s%s {" % ("    " * indent, item.header))
            render(item, indent + 1, out)
            out.append("%s}" % ("    " * indent))
        elif isinstance(item, Decl):
            out.append(item)
        else:
            out.append("    " * indent + item)


# ---- literals ----------------------------------------------------------------------------
def literal(v, ct, lang):
    if isinstance(v, Dim):
        return E("((%s)%s)" % (ct, v.c(lang)), frozenset(), ct)
    if isinstance(v, bool):
        v = int(v)
    if ct in ("float", "double"):
        v = float(v)
        if math.isnan(v):
            s = "(%s - %s)" % (lang.inf, lang.inf)
        elif math.isinf(v):
            s = lang.inf if v > 0 else "(-%s)" % lang.inf
        else:
            s = repr(v)
            if ct == "float":   # the shortest decimal that reads back as the same float
                f32 = struct.unpack("f", struct.pack("f", v))[0]
                s = next(repr(float(t)) for t in ("%.*g" % (p, f32) for p in range(1, 10))
                         if struct.unpack("f", struct.pack("f", float(t)))[0] == f32)
            if "e" not in s and "." not in s:
                s += ".0"
            s += "f" if ct == "float" else ""
        if ct == "double" and math.isinf(v):
            s = "(double)" + s
    else:
        if isinstance(v, float) and v != int(v):
            raise StartError("a fractional constant %r in an integer op" % v)
        s = str(int(v))
        if ct == lang.idx:
            s += "LL"
    if s.startswith("-"):
        s = "(%s)" % s
    return E(s, frozenset(), ct)


def fn(name, ct):
    return name + "f" if ct == "float" else name


# ---- tensors of the graph ----------------------------------------------------------------
class Tensor:
    """A tensor value: its shape (list of Dim), dtype, and how an element is computed."""
    heavy = False       # computes a reduction itself: a temporary of its own in C
    loop_last = None    # the dim its loops should put innermost (softmax's dim)

    def __init__(self, key, shape, dtype, lang):
        self.key, self.shape, self.dtype = key, list(shape), dtype
        self.ct = lang.compute(dtype)
        self.buf = None
        self.uses = 0
        self.fx = False          # the value of a node of the graph (not a part of one)
        self.is_output = False

    def rounded(self, em, e):
        """e rounded to this tensor's dtype when that is narrower than its compute type."""
        if self.dtype == torch.float16:
            em.used.add("round_half")
            return E("round_half(%s)" % e.e, e.deps, e.ct)
        if self.dtype == torch.bfloat16:
            em.used.add("round_bf16")
            return E("round_bf16(%s)" % e.e, e.deps, e.ct)
        return e


class Load(Tensor):
    """An input, a weight or a temporary: read from a pointer."""

    def __init__(self, key, shape, dtype, lang, ptr):
        super().__init__(key, shape, dtype, lang)
        self.ptr = ptr

    def emit(self, em, idx):
        e = "%s[%s]" % (self.ptr, flat(idx, self.shape, em.lang))
        if self.dtype == torch.float16:
            em.used.add("half_to_float")
            e = "half_to_float(%s)" % e
        elif self.dtype == torch.bfloat16:
            em.used.add("bf16_to_float")
            e = "bf16_to_float(%s)" % e
        return E(e, union(idx), self.ct)


class Ew(Tensor):
    """Elementwise: f(operand elements...) with broadcasting; operands are tensors or scalars."""

    def __init__(self, key, shape, dtype, lang, f, operands):
        super().__init__(key, shape, dtype, lang)
        self.f, self.operands = f, operands

    def emit(self, em, idx):
        args = []
        for o in self.operands:
            if isinstance(o, Tensor):
                v = em.value(o, bmap(idx, self.shape, o.shape))
                if v.ct != self.ct:
                    v = E("(%s)%s" % (self.ct, v.e), v.deps, self.ct)
            else:
                v = literal(o, self.ct, em.lang)
            args.append(v)
        e = E(self.f(em, [a.e for a in args], self.ct), union(args), self.ct)
        return self.rounded(em, e)


def bmap(idx, out_shape, in_shape):
    n = len(out_shape) - len(in_shape)
    return [ZERO if d.is_one() and not out_shape[n + k].is_one() else idx[n + k] for k, d in enumerate(in_shape)]


class View(Tensor):
    """An index map onto another tensor: reshape, permute, squeeze, unsqueeze."""

    def __init__(self, key, shape, dtype, lang, src, mapping):
        super().__init__(key, shape, dtype, lang)
        self.src, self.mapping = src, mapping

    def emit(self, em, idx):
        return em.value(self.src, self.mapping(em, idx))


def reshape_map(src_shape, out_shape):
    """Index map of a reshape: equal leading and trailing dims map straight; the middle goes
    through its row-major offset."""
    p = 0
    while p < min(len(src_shape), len(out_shape)) and src_shape[p] == out_shape[p]:
        p += 1
    s = 0
    while (s < min(len(src_shape), len(out_shape)) - p
           and src_shape[len(src_shape) - 1 - s] == out_shape[len(out_shape) - 1 - s]):
        s += 1
    src_mid = src_shape[p:len(src_shape) - s]
    out_mid = out_shape[p:len(out_shape) - s]

    def mapping(em, idx):
        head, tail = idx[:p], idx[len(idx) - s:]
        mid = idx[p:len(idx) - s]
        if not src_mid:
            return head + tail
        off = flat(mid, out_mid, em.lang)
        deps = union(mid)
        if not SIMPLE.match(off):
            off = em.bind(E(off, deps, em.lang.idx), base="f").e
        out = []
        for k, d in enumerate(src_mid):
            stride = numel(src_mid[k + 1:])
            e = off if stride.is_one() else "%s / %s" % (off, stride.c(em.lang))
            if k > 0:
                e = "%s %% %s" % (e if stride.is_one() else "(%s)" % e, d.c(em.lang))
            out.append(E(e, deps, em.lang.idx))
        return head + out + tail
    return mapping


class Reduce(Tensor):
    """sum, mean, prod, max, min, argmax, argmin over some dims of src."""
    heavy = True

    def __init__(self, key, shape, dtype, lang, kind, src, dims, keepdim):
        super().__init__(key, shape, dtype, lang)
        self.kind, self.src, self.dims, self.keepdim = kind, src, sorted(dims), keepdim

    def emit(self, em, idx):
        L = em.lang
        src = self.src
        kept = [i for k, i in enumerate(idx) if not (self.keepdim and k in self.dims)] if self.keepdim else list(idx)
        deps = union(kept)
        sizes = [src.shape[d] for d in self.dims]
        acc = em.fresh("acc")
        kind = self.kind
        floating = src.dtype in FLOATING
        if kind in ("sum", "mean", "prod"):
            at = "double" if floating else L.idx
            decl = ["%s %s = %s;" % (at, acc, "1" if kind == "prod" else "0")]
        elif kind in ("max", "min"):
            at = src.ct
            if floating:
                init = lang_inf(L, at, kind == "max")
            else:
                init = ("(-9223372036854775807LL - 1)" if kind == "max" else "9223372036854775807LL") \
                    if at == L.idx else ("(-2147483647 - 1)" if kind == "max" else "2147483647")
            decl = ["%s %s = %s;" % (at, acc, init)]
        else:   # argmax, argmin
            at = L.idx
            best = em.fresh("best")
            decl = ["%s %s = %s;" % (src.ct, best, lang_inf(L, src.ct, kind == "argmax") if floating else
                                     ("(-2147483647 - 1)" if kind == "argmax" else "2147483647")
                                     if src.ct == "int" else
                                     ("(-9223372036854775807LL - 1)" if kind == "argmax" else "9223372036854775807LL")),
                    "%s %s = 0;" % (L.idx, acc)]

        def body(rvars):
            full, it = [], iter(rvars)
            kit = iter(kept)
            for k in range(len(src.shape)):
                full.append(next(it) if k in self.dims else next(kit))
            v = em.value(src, full).e
            if kind in ("sum", "mean"):
                return ["%s += %s;" % (acc, v)]
            if kind == "prod":
                return ["%s *= %s;" % (acc, v)]
            if kind in ("max", "min"):
                op = ">" if kind == "max" else "<"
                nan = " || %s != %s" % (v, v) if floating else ""
                return ["if (%s %s %s%s) %s = %s;" % (v, op, acc, nan, acc, v)]
            op = ">" if kind == "argmax" else "<"
            at_ = flat(rvars, sizes, L)
            nan = " || (%s != %s && %s == %s)" % (v, v, best, best) if floating else ""
            return ["if (%s %s %s%s) { %s = %s; %s = %s; }" % (v, op, best, nan, best, v, acc, at_)]

        if kind == "mean":
            res = "(%s)(%s / (double)%s)" % (self.ct, acc, numel(sizes).c(L))
        elif self.ct != at:
            res = "(%s)%s" % (self.ct, acc)
        else:
            res = acc
        em.reduce(deps, sizes, decl, body)
        return self.rounded(em, E(res, deps, self.ct))


def lang_inf(L, ct, negative):
    s = L.inf if ct == "float" else "(double)%s" % L.inf
    return "(-%s)" % s if negative else s


class Matmul(Tensor):
    """out[batch.., i, j] = sum_k a[batch.., i, k] * b[batch.., k, j] (b given as [j, k] when
    trans_b: nn.Linear's weight); 1-d operands as torch.matmul treats them."""
    heavy = True

    def __init__(self, key, shape, dtype, lang, a, b, trans_b, a_vec, b_vec, batch, k_dim):
        super().__init__(key, shape, dtype, lang)
        self.a, self.b, self.trans_b = a, b, trans_b
        self.a_vec, self.b_vec, self.batch, self.k_dim = a_vec, b_vec, batch, k_dim

    def emit(self, em, idx):
        idx = list(idx)
        nb = len(self.batch)
        i = ZERO if self.a_vec else idx[nb]
        j = ZERO if self.b_vec else idx[nb + (0 if self.a_vec else 1)]
        bidx = idx[:nb]
        deps = union(idx)
        acc = em.fresh("acc")

        def operand_idx(t, vec, r, row):
            if vec:
                return [r]
            lead = bmap(bidx, self.batch, t.shape[:-2]) if len(t.shape) > 2 else []
            return lead + row

        def body(rvars):
            r = rvars[0]
            av = em.value(self.a, operand_idx(self.a, self.a_vec, r, [i, r]))
            bv = em.value(self.b, operand_idx(self.b, self.b_vec, r, [j, r] if self.trans_b else [r, j]))
            return ["%s += (double)%s * %s;" % (acc, av.e, bv.e)]

        em.reduce(deps, [self.k_dim], ["double %s = 0;" % acc], body)
        return self.rounded(em, E("(%s)%s" % (self.ct, acc), deps, self.ct))


# ---- elementwise formulas ----------------------------------------------------------------
def ew(template):
    """A formula over operand expressions: {0}, {1} are operands, F(name) the math function
    for the compute type, C(v) a literal of the compute type."""
    def f(em, a, ct):
        def C(v):
            return literal(v, ct, em.lang).e
        return template(a, ct, lambda n: fn(n, ct), C)
    return f


def relu6ish(x, C, lo, hi):
    return "(%s < %s ? %s : (%s > %s ? %s : %s))" % (x, C(lo), C(lo), x, C(hi), C(hi), x)


def clamp_f(lo, hi):
    def t(a, ct, Fn, C):
        x = a[0]
        if lo is not None and hi is not None:
            return "(%s < %s ? %s : (%s > %s ? %s : %s))" % (x, C(lo), C(lo), x, C(hi), C(hi), x)
        if lo is not None:
            return "(%s < %s ? %s : %s)" % (x, C(lo), C(lo), x)
        return "(%s > %s ? %s : %s)" % (x, C(hi), C(hi), x)
    return ew(t)


def pow_f(exponent):
    def t(a, ct, Fn, C):
        x = a[0]
        if exponent == 1:
            return x
        if exponent == 2:
            return "%s * %s" % (x, x)
        if exponent == 3:
            return "%s * %s * %s" % (x, x, x)
        if exponent == 0.5 and ct in ("float", "double"):
            return "%s(%s)" % (Fn("sqrt"), x)
        if exponent == -1:
            return "%s / %s" % (C(1), x)
        return "%s(%s, %s)" % (Fn("pow"), x, C(exponent))
    return ew(t)


SELU_ALPHA = 1.6732632423543772848170429916717
SELU_SCALE = 1.0507009873554804934193349852946

UNARY = {
    "neg": lambda a, ct, Fn, C: "-%s" % a[0],
    "abs": lambda a, ct, Fn, C: "%s(%s)" % (Fn("fabs"), a[0]) if ct in ("float", "double")
    else "(%s < 0 ? -%s : %s)" % (a[0], a[0], a[0]),
    "relu": lambda a, ct, Fn, C: "(%s < %s ? %s : %s)" % (a[0], C(0), C(0), a[0]),
    "relu6": lambda a, ct, Fn, C: relu6ish(a[0], C, 0, 6),
    "sigmoid": lambda a, ct, Fn, C: "%s / (%s + %s(-%s))" % (C(1), C(1), Fn("exp"), a[0]),
    "tanh": lambda a, ct, Fn, C: "%s(%s)" % (Fn("tanh"), a[0]),
    "silu": lambda a, ct, Fn, C: "%s / (%s + %s(-%s))" % (a[0], C(1), Fn("exp"), a[0]),
    "exp": lambda a, ct, Fn, C: "%s(%s)" % (Fn("exp"), a[0]),
    "log": lambda a, ct, Fn, C: "%s(%s)" % (Fn("log"), a[0]),
    "sqrt": lambda a, ct, Fn, C: "%s(%s)" % (Fn("sqrt"), a[0]),
    "rsqrt": lambda a, ct, Fn, C: "%s / %s(%s)" % (C(1), Fn("sqrt"), a[0]),
    "erf": lambda a, ct, Fn, C: "%s(%s)" % (Fn("erf"), a[0]),
    "square": lambda a, ct, Fn, C: "%s * %s" % (a[0], a[0]),
    "reciprocal": lambda a, ct, Fn, C: "%s / %s" % (C(1), a[0]),
    "softsign": lambda a, ct, Fn, C: "%s / (%s + %s(%s))" % (a[0], C(1), Fn("fabs"), a[0]),
    "hardsigmoid": lambda a, ct, Fn, C: "%s / %s" % (relu6ish("(%s + %s)" % (a[0], C(3)), C, 0, 6), C(6)),
    "hardswish": lambda a, ct, Fn, C: "%s * %s / %s" % (a[0], relu6ish("(%s + %s)" % (a[0], C(3)), C, 0, 6), C(6)),
    "mish": lambda a, ct, Fn, C: "%s * %s(%s(%s(%s)))" % (a[0], Fn("tanh"), Fn("log1p"), Fn("exp"), a[0]),
    "selu": lambda a, ct, Fn, C: "%s * (%s > %s ? %s : %s * %s(%s))" % (
        C(SELU_SCALE), a[0], C(0), a[0], C(SELU_ALPHA), Fn("expm1"), a[0]),
    "identity": lambda a, ct, Fn, C: a[0],
}
BINARY = {
    "add": lambda a, ct, Fn, C: "%s + %s" % (a[0], a[1]),
    "sub": lambda a, ct, Fn, C: "%s - %s" % (a[0], a[1]),
    "mul": lambda a, ct, Fn, C: "%s * %s" % (a[0], a[1]),
    "div": lambda a, ct, Fn, C: "%s / %s" % (a[0], a[1]),
    "maximum": lambda a, ct, Fn, C: "((%s != %s || %s > %s) ? %s : %s)" % (a[0], a[0], a[0], a[1], a[0], a[1]),
    "minimum": lambda a, ct, Fn, C: "((%s != %s || %s < %s) ? %s : %s)" % (a[0], a[0], a[0], a[1], a[0], a[1]),
    "pow": lambda a, ct, Fn, C: "%s(%s, %s)" % (Fn("pow"), a[0], a[1]),
}


# ---- tracing -----------------------------------------------------------------------------
def load_model(path):
    if not os.path.isfile(path):
        raise StartError("%s: no such file" % path)
    spec = importlib.util.spec_from_file_location("kwb_model_%d" % os.getpid(), path)
    mod = importlib.util.module_from_spec(spec)
    try:
        spec.loader.exec_module(mod)
    except Exception as e:
        raise StartError("%s: %s: %s" % (path, type(e).__name__, e))
    for name in ("Model", "get_init_inputs"):
        if not hasattr(mod, name):
            raise StartError("%s: no %s (KernelBench's format: class Model, get_inputs(), get_init_inputs())" % (path, name))
    torch.manual_seed(0)
    try:
        model = mod.Model(*mod.get_init_inputs())
    except Exception as e:
        raise StartError("%s: Model(*get_init_inputs()): %s: %s" % (path, type(e).__name__, e))
    return model


def check_spec(spec, where):
    def need(obj, field, ctx, kind):
        if not isinstance(obj, dict) or field not in obj:
            raise StartError("%s: %s has no %s" % (where, ctx, field))
        if not isinstance(obj[field], kind):
            raise StartError("%s: %s.%s is not a %s" % (where, ctx, field, kind.__name__))
        return obj[field]
    ident = re.compile(r"^[A-Za-z_][A-Za-z_0-9]*$")
    names = set()
    for sect in ("vars", "inputs", "weights", "outputs"):
        for k, item in enumerate(spec.get(sect, [])):
            ctx = "%s[%d]" % (sect, k)
            n = need(item, "name", ctx, str)
            if not ident.match(n):
                raise StartError("%s: %s.name %r is not a C identifier" % (where, ctx, n))
            if n in names:
                raise StartError("%s: %s.name %r is used twice" % (where, ctx, n))
            names.add(n)
            if sect == "vars":
                v = need(item, "value", ctx, int)
                if v < 0:
                    raise StartError("%s: %s.value is negative" % (where, ctx))
                continue
            dt = need(item, "dtype", ctx, str)
            if dt not in DTYPES:
                raise StartError("%s: %s.dtype %r is none of %s" % (where, ctx, dt, " ".join(DTYPES)))
            for j, d in enumerate(need(item, "dims", ctx, list)):
                if not (isinstance(d, int) and d >= 0) and d not in [v["name"] for v in spec.get("vars", [])]:
                    raise StartError("%s: %s.dims[%d] %r is neither a var nor an integer" % (where, ctx, j, d))
            if sect == "weights":
                need(item, "param", ctx, str)
    for k, c in enumerate(spec.get("consts", [])):
        need(c, "index", "consts[%d]" % k, int)
        if "value" not in c:
            raise StartError("%s: consts[%d] has no value" % (where, k))
    if not spec.get("outputs"):
        raise StartError("%s: no outputs" % where)


def dims_of(item):
    return [Dim(1, [d]) if isinstance(d, str) else Dim(d) for d in item["dims"]]


class Recorder(fx.Interpreter):
    """Runs the graph once and keeps every node's result's dtype and shape."""

    def __init__(self, gm):
        super().__init__(gm)
        self.seen = {}

    def run_node(self, n):
        r = super().run_node(n)
        self.seen[n.name] = describe_value(r)
        return r


def describe_value(r):
    if isinstance(r, torch.Tensor):
        return (r.dtype, tuple(r.shape))
    if isinstance(r, (tuple, list)):
        return tuple(describe_value(x) for x in r)
    return r


def trace(model, spec, where):
    params = list(inspect.signature(model.forward).parameters.values())
    consts = {c["index"]: c["value"] for c in spec.get("consts", [])}
    n_args = len(spec["inputs"]) + len(consts)
    if any(p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD) for p in params):
        raise StartError("%s: Model.forward takes *args; name its arguments" % where)
    if len(params) < n_args:
        raise StartError("%s: the spec gives %d arguments, Model.forward takes %d" % (where, n_args, len(params)))
    for i in consts:
        if not 0 <= i < n_args:
            raise StartError("%s: consts index %d is outside forward's %d arguments" % (where, i, n_args))
    concrete = {params[i].name: v for i, v in consts.items()}
    tensor_params = [params[i].name for i in range(n_args) if i not in consts]
    try:
        gm = fx.symbolic_trace(model, concrete_args=concrete or None)
    except Exception as e:   # data-dependent control flow, iterating over a tensor, ...
        raise Unsupported("a Model.forward torch.fx cannot trace (%s: %s)"
                          % (type(e).__name__, (str(e).splitlines() or [""])[0]))
    return gm, tensor_params, consts, n_args


def example_args(spec, consts, n_args, device="cpu"):
    env = {v["name"]: v["value"] for v in spec.get("vars", [])}
    g = torch.Generator().manual_seed(0)
    tensors = []
    for item in spec["inputs"]:
        shape = [env[d] if isinstance(d, str) else d for d in item["dims"]]
        dt = DTYPES[item["dtype"]]
        if device == "meta":
            t = torch.empty(shape, dtype=dt, device="meta")
        elif dt in FLOATING:
            t = torch.randn(shape, generator=g).to(dt)
        else:
            t = torch.randint(0, 4, shape, generator=g).to(dt)
        tensors.append(t)
    it = iter(tensors)
    return [consts[i] if i in consts else next(it) for i in range(n_args)]


PROBE_ELEMENTS = 1 << 25


def record(gm, spec, consts, n_args):
    """Every node's dtype and shape at the spec's example values: run on the CPU, or on the meta
    device (shapes only) when the example is too large to run here."""
    env = {v["name"]: v["value"] for v in spec.get("vars", [])}
    size = sum(int(numel(dims_of(x)).value(env)) for x in spec["inputs"] + spec["outputs"])
    tries = ["cpu", "meta"] if size <= PROBE_ELEMENTS else ["meta", "cpu"]
    err = None
    for dev in tries:
        try:
            g = gm if dev == "cpu" else _meta_copy(gm)
            rec = Recorder(g)
            with torch.no_grad():
                rec.run(*example_args(spec, consts, n_args, dev))
            return rec.seen
        except Exception as e:   # the meta device lacks some ops on old PyTorch
            err = e
    raise StartError("running Model.forward on the spec's example inputs failed: %s: %s"
                     % (type(err).__name__, str(err).splitlines()[0] if str(err) else ""))


def _meta_copy(gm):
    import copy
    return copy.deepcopy(gm).to("meta")


# ---- translating the graph ---------------------------------------------------------------
def op_name(node, root):
    if node.op == "call_method":
        return "Tensor.%s" % node.target
    if node.op == "call_module":
        m = root.get_submodule(node.target)
        cls = type(m)
        if getattr(nn, cls.__name__, None) is cls:
            return "torch.nn.%s" % cls.__name__
        return "%s.%s" % (cls.__module__, cls.__qualname__)
    t = node.target
    name = getattr(t, "__name__", str(t))
    for mod, label in ((F, "torch.nn.functional"), (torch, "torch"), (operator, "operator")):
        if getattr(mod, name, None) is t:
            return "%s.%s" % (label, name)
    return "%s.%s" % (getattr(t, "__module__", None) or "?", name)


REQ = object()


class Translator:
    def __init__(self, gm, spec, lang, tensor_params, seen, where):
        self.gm, self.spec, self.lang, self.where = gm, spec, lang, where
        self.seen = seen
        self.tensor_params = tensor_params
        self.env = {}
        self.count = 0
        self.weights = {w["param"]: w for w in spec.get("weights", [])}

    # -- helpers
    def key(self, base):
        self.count += 1
        return "%s#%d" % (base, self.count)

    def dtype_of(self, node, part=None):
        s = self.seen.get(node.name)
        if part is not None and isinstance(s, tuple) and s and isinstance(s[0], tuple):
            s = s[part]
        if not (isinstance(s, tuple) and len(s) == 2 and isinstance(s[0], torch.dtype)):
            raise Unsupported(op_name(node, self.gm) + " (its result is not a tensor)", node.name)
        return s[0]

    def ew(self, node, f, operands, dtype=None, key=None):
        shape = []
        for o in operands:
            if isinstance(o, Tensor):
                shape = broadcast(shape, o.shape, node.name)
        return Ew(key or node.name, shape, dtype or self.dtype_of(node), self.lang, f, operands)

    def weight(self, node, param):
        w = self.weights.get(param)
        if w is None:
            raise StartError("%s: node %s reads %s, which is not among the spec's weights" % (self.where, node.name, param))
        return Load("w:" + w["name"], dims_of(w), DTYPES[w["dtype"]], self.lang, w["name"])

    def args(self, node, a, kw, params):
        """Bind positional and keyword arguments to params [(name, default)]."""
        names = [p[0] for p in params]
        if len(a) > len(params):
            raise Unsupported("%s with %d arguments" % (op_name(node, self.gm), len(a)), node.name)
        out = dict(zip(names, a))
        for k, v in kw.items():
            if k not in names:
                raise Unsupported("%s with argument %s" % (op_name(node, self.gm), k), node.name)
            out[k] = v
        for n, d in params:
            if n not in out:
                if d is REQ:
                    raise StartError("node %s: %s needs argument %s" % (node.name, op_name(node, self.gm), n))
                out[n] = d
        return out

    def dim(self, node, t, d):
        if isinstance(d, Dim):
            d = d.const()
        if not isinstance(d, int):
            raise Unsupported("%s with dim %r" % (op_name(node, self.gm), d), node.name)
        nd = max(len(t.shape), 1)
        if not -nd <= d < nd:
            raise StartError("node %s: dim %d out of range for %d dims" % (node.name, d, len(t.shape)))
        return d % nd

    def dims(self, node, t, d):
        if d is None or d == () or d == []:
            return list(range(len(t.shape)))
        if isinstance(d, (list, tuple)):
            return sorted(set(self.dim(node, t, x) for x in d))
        return [self.dim(node, t, d)]

    def inplace_ok(self, n):
        """An in-place op is translated as a pure one: right only when nothing else reads its input."""
        src = n.all_input_nodes[0] if n.all_input_nodes else None
        if src is not None and len([u for u in src.users if u in self.live]) > 1:
            raise Unsupported("%s in place on a value read elsewhere" % op_name(n, self.gm), n.name)

    # -- the graph
    def run(self):
        g = self.gm.graph
        out_node = [n for n in g.nodes if n.op == "output"][0]
        live = self.live = set()
        todo = [out_node]
        while todo:
            n = todo.pop()
            if n in live:
                continue
            live.add(n)
            todo.extend(n.all_input_nodes)
        for n in g.nodes:
            if n.op == "call_method" and n.target.endswith("_") and not n.target.startswith("__"):
                raise Unsupported("Tensor.%s (in place)" % n.target, n.name)
        for n in g.nodes:
            if n not in live or n.op == "output":
                continue
            a = fx.node.map_arg(n.args, lambda x: self.env[x.name])
            kw = fx.node.map_arg(n.kwargs, lambda x: self.env[x.name])
            for x in list(n.all_input_nodes):
                v = self.env[x.name]
                if isinstance(v, Tensor):
                    v.uses += 1
            v = self.env[n.name] = self.node(n, a, kw)
            for t in (v if isinstance(v, tuple) else (v,)):
                if isinstance(t, Tensor):
                    t.fx = True
            self.check(n)
        res = out_node.args[0]
        res = list(res) if isinstance(res, (tuple, list)) else [res]
        outs = []
        for r in res:
            v = self.env[r.name] if isinstance(r, fx.Node) else r
            if not isinstance(v, Tensor):
                raise Unsupported("a forward that returns %r" % (v,), "output")
            v.uses += 1
            v.is_output = True
            outs.append(v)
        return outs

    def check(self, n):
        """The inferred shape agrees with the recorded one at the example values."""
        v = self.env[n.name]
        if not isinstance(v, Tensor):
            return
        env = {x["name"]: x["value"] for x in self.spec.get("vars", [])}
        s = self.seen.get(n.name)
        if isinstance(s, tuple) and len(s) == 2 and isinstance(s[1], tuple):
            got = tuple(int(d.value(env)) for d in v.shape)
            if got != s[1]:
                raise StartError("node %s: shape %s at the example values is %s, torch says %s"
                                 % (n.name, v.shape, got, s[1]))

    def node(self, n, a, kw):
        if n.op == "placeholder":
            if n.target not in self.tensor_params:
                raise Unsupported("a const argument used as a value (%s)" % n.target, n.name)
            k = self.tensor_params.index(n.target)
            item = self.spec["inputs"][k]
            return Load("in:" + item["name"], dims_of(item), DTYPES[item["dtype"]], self.lang, item["name"])
        if n.op == "get_attr":
            return self.weight(n, n.target)
        if n.op == "call_module":
            m = self.gm.get_submodule(n.target)
            h = MODULES.get(type(m))
            if h is None:
                raise Unsupported(op_name(n, self.gm), n.name)
            if getattr(m, "inplace", False):
                self.inplace_ok(n)
            return h(self, n, m, a, kw)
        if n.op == "call_method":
            h = METHODS.get(n.target)
        else:
            h = FUNCTIONS.get(n.target)
        if h is None:
            raise Unsupported(op_name(n, self.gm), n.name)
        return h(self, n, a, kw)


# ---- op handlers: (translator, node, args, kwargs) -> value ---------------------------------
def unary(name, **extra):
    def h(tr, n, a, kw):
        p = tr.args(n, a, kw, [("input", REQ)] + [(k, v) for k, v in extra.items()])
        if p.get("inplace"):
            tr.inplace_ok(n)
        return tr.ew(n, ew(UNARY[name]), [p["input"]])
    return h


def param_unary(params, make):
    def h(tr, n, a, kw):
        p = tr.args(n, a, kw, [("input", REQ)] + params)
        if p.get("inplace"):
            tr.inplace_ok(n)
        return tr.ew(n, make(p), [p["input"]])
    return h


def gelu_f(p):
    if p["approximate"] == "none":
        return ew(lambda a, ct, Fn, C: "%s * %s * (%s + %s(%s * %s))" % (
            C(0.5), a[0], C(1), Fn("erf"), a[0], C(0.7071067811865476)))
    if p["approximate"] == "tanh":
        return ew(lambda a, ct, Fn, C: "%s * %s * (%s + %s(%s * (%s + %s * %s * %s * %s)))" % (
            C(0.5), a[0], C(1), Fn("tanh"), C(0.7978845608028654), a[0], C(0.044715), a[0], a[0], a[0]))
    raise StartError("gelu approximate=%r" % p["approximate"])


def scalar_ok(x):
    return isinstance(x, (int, float, bool, Dim))


def binary(name):
    def h(tr, n, a, kw):
        params = [("input", REQ), ("other", REQ)]
        if name in ("add", "sub"):
            params.append(("alpha", 1))
        if name == "div":
            params.append(("rounding_mode", None))
        p = tr.args(n, a, kw, params)
        x, y = p["input"], p["other"]
        if not isinstance(x, Tensor) and not isinstance(y, Tensor):
            return int_arith(tr, n, name, x, y)
        if name not in BINARY:
            raise Unsupported(op_name(n, tr.gm), n.name)
        for o in (x, y):
            if not isinstance(o, Tensor) and not scalar_ok(o):
                raise Unsupported("%s with operand %r" % (op_name(n, tr.gm), o), n.name)
        if p.get("rounding_mode") is not None:
            raise Unsupported("%s with rounding_mode=%r" % (op_name(n, tr.gm), p["rounding_mode"]), n.name)
        alpha = p.get("alpha", 1)
        if alpha != 1:
            if not isinstance(y, Tensor):
                y = y * alpha
            else:
                y = tr.ew(n, ew(BINARY["mul"]), [y, alpha], dtype=y.dtype, key=tr.key(n.name + ".alpha"))
        if name == "pow" and isinstance(x, Tensor) and not isinstance(y, Tensor):
            return tr.ew(n, pow_f(y), [x])
        return tr.ew(n, ew(BINARY[name]), [x, y])
    return h


def reverse(h):
    return lambda tr, n, a, kw: h(tr, n, (a[1], a[0]), kw)


def int_arith(tr, n, name, x, y):
    """Arithmetic on sizes (x.size(0) * 2): exact, or not supported."""
    if not all(isinstance(v, (int, Dim)) and not isinstance(v, bool) for v in (x, y)):
        raise Unsupported("%s on %r and %r" % (op_name(n, tr.gm), x, y), n.name)
    dx, dy = Dim.of(x), Dim.of(y)
    if name == "mul":
        return dx * dy
    if name in ("floordiv", "div"):
        q = dx.exact_div(dy)
        if q is not None and (q.vars or q.coef.denominator == 1):
            return q
    if dx.const() is not None and dy.const() is not None:
        return Dim({"add": operator.add, "sub": operator.sub, "floordiv": operator.floordiv}.get(
            name, operator.mul)(dx.const(), dy.const()))
    raise Unsupported("%s on sizes %s and %s" % (op_name(n, tr.gm), dx, dy), n.name)


def clamp_h(lo_name, hi_name, lo_def, hi_def):
    def h(tr, n, a, kw):
        p = tr.args(n, a, kw, [("input", REQ), (lo_name, lo_def), (hi_name, hi_def), ("inplace", False)])
        lo, hi = p[lo_name], p[hi_name]
        if isinstance(lo, Tensor) or isinstance(hi, Tensor):
            raise Unsupported("%s with tensor bounds" % op_name(n, tr.gm), n.name)
        if lo is None and hi is None:
            return tr.ew(n, ew(UNARY["identity"]), [p["input"]])
        return tr.ew(n, clamp_f(lo, hi), [p["input"]])
    return h


def reduction(kind):
    def h(tr, n, a, kw):
        params = [("input", REQ), ("dim", None), ("keepdim", False)]
        if kind in ("sum", "mean", "prod"):
            params.append(("dtype", None))
        if kind in ("max", "min"):
            params = [("input", REQ), ("dim", None), ("keepdim", False)]
        p = tr.args(n, a, kw, params)
        x, d = p["input"], p["dim"]
        if kind in ("max", "min") and isinstance(d, Tensor):   # torch.max(a, b): elementwise
            return tr.ew(n, ew(BINARY["maximum" if kind == "max" else "minimum"]), [x, d])
        if p.get("dtype") is not None:
            raise Unsupported("%s with dtype=%s" % (op_name(n, tr.gm), p["dtype"]), n.name)
        if not isinstance(x, Tensor):
            raise Unsupported("%s of a non-tensor" % op_name(n, tr.gm), n.name)
        if kind in ("max", "min") and d is not None:   # (values, indices)
            dims = tr.dims(n, x, d)
            vals = make_reduce(tr, n, kind, x, dims, p["keepdim"], tr.dtype_of(n, 0), tr.key(n.name + ".values"))
            idxs = make_reduce(tr, n, "arg" + kind, x, dims, p["keepdim"], torch.int64, tr.key(n.name + ".indices"))
            return ("values", vals, "indices", idxs)
        all_dims = d is None and kind not in ("argmax", "argmin")
        dims = list(range(len(x.shape))) if d is None else tr.dims(n, x, d)
        keep = p["keepdim"] and not all_dims
        return make_reduce(tr, n, kind, x, dims, keep, tr.dtype_of(n), n.name, flatten_all=d is None)
    return h


def make_reduce(tr, n, kind, x, dims, keepdim, dtype, key, flatten_all=False):
    if kind in ("amax", "amin"):
        kind = kind[1:]
    if flatten_all and kind in ("argmax", "argmin"):   # an index into the flattened tensor
        shape = [Dim(1)] * len(x.shape) if keepdim else []
    else:
        shape = [Dim(1) if k in dims else s for k, s in enumerate(x.shape) if keepdim or k not in dims]
    return Reduce(key, shape, dtype, tr.lang, kind, x, dims, keepdim)


def amax_h(kind):
    def h(tr, n, a, kw):
        p = tr.args(n, a, kw, [("input", REQ), ("dim", ()), ("keepdim", False)])
        x = p["input"]
        dims = tr.dims(n, x, p["dim"])
        return make_reduce(tr, n, kind, x, dims, p["keepdim"], tr.dtype_of(n), n.name)
    return h


def softmax_h(params, log):
    def h(tr, n, a, kw):
        p = tr.args(n, a, kw, params)
        if p.get("dtype") is not None:
            raise Unsupported("%s with dtype=%s" % (op_name(n, tr.gm), p["dtype"]), n.name)
        x = p["input"]
        d = p["dim"]
        if d is None:   # F.softmax's implicit dim
            d = 0 if len(x.shape) in (0, 1, 3) else 1
        return make_softmax(tr, n, x, tr.dim(n, x, d), log, tr.dtype_of(n))
    return h


def make_softmax(tr, n, x, d, log, dtype):
    """softmax = exp(x - max) / sum(exp(x - max)); log_softmax = x - max - log(sum(...)),
    computed in float (double for f64) and rounded once at the end."""
    L = tr.lang
    inner = torch.float64 if dtype == torch.float64 else torch.float32
    if len(x.shape) == 0:
        x = View(tr.key(n.name + ".1d"), [Dim(1)], x.dtype, L, x, lambda em, idx: [])
    mx = Reduce(tr.key(n.name + ".max"), [Dim(1) if k == d else s for k, s in enumerate(x.shape)],
                inner, L, "max", x, [d], True)
    sh = Ew(tr.key(n.name + ".shift"), x.shape, inner, L, ew(BINARY["sub"]), [x, mx])
    ex = Ew(tr.key(n.name + ".exp"), x.shape, inner, L, ew(UNARY["exp"]), [sh])
    sm = Reduce(tr.key(n.name + ".sum"), mx.shape, inner, L, "sum", ex, [d], True)
    if log:
        out = Ew(n.name, x.shape, dtype, L,
                 ew(lambda a, ct, Fn, C: "%s - %s(%s)" % (a[0], Fn("log"), a[1])), [sh, sm])
    else:
        out = Ew(n.name, x.shape, dtype, L, ew(BINARY["div"]), [ex, sm])
    out.heavy = True
    out.loop_last = d
    return out


def matmul_h(kind):
    def h(tr, n, a, kw):
        p = tr.args(n, a, kw, [("input", REQ), ("other", REQ)] if kind != "linear"
                    else [("input", REQ), ("weight", REQ), ("bias", None)])
        if kind == "linear":
            return make_linear(tr, n, p["input"], p["weight"], p["bias"])
        x, y = p["input"], p["other"]
        if not (isinstance(x, Tensor) and isinstance(y, Tensor)):
            raise Unsupported("%s of a non-tensor" % op_name(n, tr.gm), n.name)
        want = {"mm": 2, "bmm": 3}.get(kind)
        if want and (len(x.shape) != want or len(y.shape) != want):
            raise StartError("node %s: %s needs %d-d operands, got %s and %s" % (n.name, kind, want, x.shape, y.shape))
        return make_matmul(tr, n, x, y, False, tr.dtype_of(n), n.name)
    return h


def make_matmul(tr, n, x, y, trans_b, dtype, key):
    if not x.shape or not y.shape:
        raise StartError("node %s: matmul of a 0-d tensor" % n.name)
    a_vec, b_vec = len(x.shape) == 1, len(y.shape) == 1
    A = [Dim(1)] + x.shape if a_vec else x.shape
    if trans_b:
        B = y.shape[::-1] if len(y.shape) == 2 else None
        if B is None:
            raise StartError("node %s: a linear weight must be 2-d, not %s" % (n.name, y.shape))
    else:
        B = y.shape + [Dim(1)] if b_vec else y.shape
    if A[-1] != B[-2]:
        raise StartError("node %s: inner dims differ: %s and %s" % (n.name, x.shape, y.shape))
    batch = broadcast(A[:-2], B[:-2], n.name)
    shape = batch + ([] if a_vec else [A[-2]]) + ([] if b_vec else [B[-1]])
    if trans_b and len(x.shape) > 2:   # linear's leading dims are the batch, the weight has none
        batch = x.shape[:-2]
        shape = x.shape[:-1] + [y.shape[0]]
    return Matmul(key, shape, dtype, tr.lang, x, y, trans_b, a_vec, b_vec, batch, A[-1])


def make_linear(tr, n, x, w, b):
    dtype = tr.dtype_of(n)
    if b is None:
        return make_matmul(tr, n, x, w, True, dtype, n.name)
    mm = make_matmul(tr, n, x, w, True, dtype, tr.key(n.name + ".mm"))
    out = Ew(n.name, mm.shape, dtype, tr.lang, ew(BINARY["add"]), [mm, b])
    out.heavy = True
    return out


def layer_norm(tr, n, x, shape, w, b, eps):
    """(x - mean) / sqrt(var + eps) * w + b over the last len(shape) dims (var biased)."""
    L = tr.lang
    nd = len(shape)
    if [Dim.of(s) for s in shape] != x.shape[len(x.shape) - nd:]:
        raise StartError("node %s: normalized_shape %s is not the last dims of %s" % (n.name, list(shape), x.shape))
    dtype = tr.dtype_of(n)
    inner = torch.float64 if dtype == torch.float64 else torch.float32
    dims = list(range(len(x.shape) - nd, len(x.shape)))
    kshape = [Dim(1) if k in dims else s for k, s in enumerate(x.shape)]
    mean = Reduce(tr.key(n.name + ".mean"), kshape, inner, L, "mean", x, dims, True)
    xc = Ew(tr.key(n.name + ".xc"), x.shape, inner, L, ew(BINARY["sub"]), [x, mean])
    sq = Ew(tr.key(n.name + ".sq"), x.shape, inner, L, ew(UNARY["square"]), [xc])
    var = Reduce(tr.key(n.name + ".var"), kshape, inner, L, "mean", sq, dims, True)
    rstd = Ew(tr.key(n.name + ".rstd"), kshape, inner, L,
              ew(lambda a, ct, Fn, C: "%s / %s(%s + %s)" % (C(1), Fn("sqrt"), a[0], C(eps))), [var])
    operands = [xc, rstd]
    form = "{0} * {1}"
    if w is not None:
        operands.append(w)
        form += " * {%d}" % (len(operands) - 1)
    if b is not None:
        operands.append(b)
        form += " + {%d}" % (len(operands) - 1)
    out = Ew(n.name, x.shape, dtype, L, ew(lambda a, ct, Fn, C: form.format(*a)), operands)
    out.heavy = True
    return out


def layer_norm_h(tr, n, a, kw):
    p = tr.args(n, a, kw, [("input", REQ), ("normalized_shape", REQ), ("weight", None), ("bias", None),
                           ("eps", 1e-5)])
    s = p["normalized_shape"]
    s = list(s) if isinstance(s, (list, tuple)) else [s]
    return layer_norm(tr, n, p["input"], s, p["weight"], p["bias"], p["eps"])


# -- views
def shape_arg(node, a):
    if len(a) == 1 and isinstance(a[0], (tuple, list, torch.Size)):
        a = list(a[0])
    return list(a)


def make_reshape(tr, n, x, sizes):
    sizes = [s.const() if isinstance(s, Dim) and s.const() == -1 else s for s in sizes]
    known = Dim(1)
    neg = [k for k, s in enumerate(sizes) if s == -1]
    for s in sizes:
        if not (isinstance(s, Dim) or (isinstance(s, int) and not isinstance(s, bool))):
            raise Unsupported("%s with size %r" % (op_name(n, tr.gm), s), n.name)
        if s != -1:
            known = known * Dim.of(s)
    shape = [Dim.of(s) if s != -1 else None for s in sizes]
    if len(neg) > 1:
        raise StartError("node %s: more than one -1 in %s" % (n.name, sizes))
    if neg:
        q = numel(x.shape).exact_div(known)
        if q is None:
            raise Unsupported("%s whose -1 is not a product of the shape's vars" % op_name(n, tr.gm), n.name)
        shape[neg[0]] = q
    if numel(shape) != numel(x.shape):
        raise Unsupported("%s from %s to %s (sizes not provably equal)" % (op_name(n, tr.gm), x.shape, shape), n.name)
    return View(n.name, shape, x.dtype, tr.lang, x, reshape_map(x.shape, shape))


def view_h(tr, n, a, kw):
    if "dtype" in kw or (len(a) == 2 and isinstance(a[1], torch.dtype)):
        raise Unsupported("Tensor.view as another dtype", n.name)
    x = a[0]
    sizes = shape_arg(n, list(a[1:]) + ([kw["size"]] if "size" in kw else []) + ([kw["shape"]] if "shape" in kw else []))
    return make_reshape(tr, n, x, sizes)


def flatten_h(tr, n, a, kw):
    p = tr.args(n, a, kw, [("input", REQ), ("start_dim", 0), ("end_dim", -1)])
    return make_flatten(tr, n, p["input"], p["start_dim"], p["end_dim"])


def make_flatten(tr, n, x, s, e):
    if not x.shape:
        return make_reshape(tr, n, x, [1])
    s, e = tr.dim(n, x, s), tr.dim(n, x, e)
    return make_reshape(tr, n, x, x.shape[:s] + [numel(x.shape[s:e + 1])] + x.shape[e + 1:])


def permute_to(tr, n, x, perm):
    if sorted(perm) != list(range(len(x.shape))):
        raise StartError("node %s: %s is not a permutation of %d dims" % (n.name, perm, len(x.shape)))
    shape = [x.shape[p] for p in perm]

    def mapping(em, idx):
        src = [None] * len(perm)
        for k, p in enumerate(perm):
            src[p] = idx[k]
        return src
    return View(n.name, shape, x.dtype, tr.lang, x, mapping)


def transpose_h(tr, n, a, kw):
    p = tr.args(n, a, kw, [("input", REQ), ("dim0", REQ), ("dim1", REQ)])
    x = p["input"]
    d0, d1 = tr.dim(n, x, p["dim0"]), tr.dim(n, x, p["dim1"])
    perm = list(range(len(x.shape)))
    perm[d0], perm[d1] = perm[d1], perm[d0]
    return permute_to(tr, n, x, perm)


def t_h(tr, n, a, kw):
    x = tr.args(n, a, kw, [("input", REQ)])["input"]
    if len(x.shape) < 2:
        return x
    if len(x.shape) != 2:
        raise StartError("node %s: t() of a %d-d tensor" % (n.name, len(x.shape)))
    return permute_to(tr, n, x, [1, 0])


def permute_method(tr, n, a, kw):
    x = a[0]
    dims = shape_arg(n, list(a[1:]) + ([kw["dims"]] if "dims" in kw else []))
    return permute_to(tr, n, x, [tr.dim(n, x, d) for d in dims])


def permute_fn(tr, n, a, kw):
    p = tr.args(n, a, kw, [("input", REQ), ("dims", REQ)])
    x = p["input"]
    return permute_to(tr, n, x, [tr.dim(n, x, d) for d in p["dims"]])


def unsqueeze_h(tr, n, a, kw):
    p = tr.args(n, a, kw, [("input", REQ), ("dim", REQ)])
    x = p["input"]
    d = p["dim"]
    nd = len(x.shape) + 1
    if not -nd <= d < nd:
        raise StartError("node %s: unsqueeze dim %d out of range" % (n.name, d))
    d %= nd
    shape = x.shape[:d] + [Dim(1)] + x.shape[d:]
    return View(n.name, shape, x.dtype, tr.lang, x, lambda em, idx: idx[:d] + idx[d + 1:])


def squeeze_h(tr, n, a, kw):
    p = tr.args(n, a, kw, [("input", REQ), ("dim", None)])
    x = p["input"]
    ds = range(len(x.shape)) if p["dim"] is None else tr.dims(n, x, p["dim"])
    gone = [k for k in ds if x.shape[k].is_one()]
    shape = [s for k, s in enumerate(x.shape) if k not in gone]

    def mapping(em, idx):
        it = iter(idx)
        return [ZERO if k in gone else next(it) for k in range(len(x.shape))]
    return View(n.name, shape, x.dtype, tr.lang, x, mapping)


def identity_h(params):
    def h(tr, n, a, kw):
        p = tr.args(n, a, kw, [("input", REQ)] + params)
        if p.get("memory_format") not in (None, torch.contiguous_format):
            raise Unsupported("%s with memory_format=%s" % (op_name(n, tr.gm), p["memory_format"]), n.name)
        return p["input"]
    return h


def cast_h(dtype):
    def h(tr, n, a, kw):
        x = tr.args(n, a, kw, [("input", REQ)])["input"]
        return tr.ew(n, ew(UNARY["identity"]), [x], dtype=dtype)
    return h


def to_h(tr, n, a, kw):
    x = a[0]
    rest = list(a[1:]) + [v for k, v in kw.items() if k == "dtype"]
    if any(k not in ("dtype", "copy", "non_blocking") for k in kw) or len(rest) != 1 \
            or not isinstance(rest[0], torch.dtype):
        raise Unsupported("Tensor.to other than to a dtype", n.name)
    return tr.ew(n, ew(UNARY["identity"]), [x], dtype=rest[0])


def dropout_h(tr, n, a, kw):
    p = tr.args(n, a, kw, [("input", REQ), ("p", 0.5), ("training", True), ("inplace", False)])
    if p["training"] and p["p"] > 0:
        raise Unsupported("%s with p=%g in training mode (random)" % (op_name(n, tr.gm), p["p"]), n.name)
    return p["input"]


# -- sizes, tuples, attributes
def size_h(tr, n, a, kw):
    p = tr.args(n, a, kw, [("input", REQ), ("dim", None)])
    x = p["input"]
    if p["dim"] is None:
        return tuple(x.shape)
    return x.shape[tr.dim(n, x, p["dim"])]


def dim_h(tr, n, a, kw):
    return len(tr.args(n, a, kw, [("input", REQ)])["input"].shape)


def numel_h(tr, n, a, kw):
    return numel(tr.args(n, a, kw, [("input", REQ)])["input"].shape)


def getitem_h(tr, n, a, kw):
    x, i = a
    if isinstance(x, tuple) and len(x) == 4 and x[0] == "values":   # max/min with dim
        x = (x[1], x[3])
    if isinstance(x, tuple) and isinstance(i, (int, slice)):
        return x[i]
    raise Unsupported("operator.getitem (%s)" % ("tensor indexing" if isinstance(x, Tensor) else repr(i)), n.name)


def getattr_h(tr, n, a, kw):
    x, name = a
    if isinstance(x, tuple) and len(x) == 4 and x[0] == "values" and name in ("values", "indices"):
        return x[1] if name == "values" else x[3]
    if isinstance(x, Tensor):
        if name == "shape":
            return tuple(x.shape)
        if name == "T":
            return permute_to(tr, n, x, list(range(len(x.shape)))[::-1])
        if name == "mT" and len(x.shape) >= 2:
            perm = list(range(len(x.shape)))
            perm[-1], perm[-2] = perm[-2], perm[-1]
            return permute_to(tr, n, x, perm)
    raise Unsupported("getattr %s" % name, n.name)


# -- modules
def mod_unary(name):
    def h(tr, n, m, a, kw):
        return tr.ew(n, ew(UNARY[name]), [a[0]])
    return h


def mod_linear(tr, n, m, a, kw):
    w = tr.weight(n, n.target + ".weight")
    b = tr.weight(n, n.target + ".bias") if m.bias is not None else None
    return make_linear(tr, n, a[0], w, b)


def mod_layer_norm(tr, n, m, a, kw):
    w = tr.weight(n, n.target + ".weight") if m.weight is not None else None
    b = tr.weight(n, n.target + ".bias") if getattr(m, "bias", None) is not None else None
    return layer_norm(tr, n, a[0], list(m.normalized_shape), w, b, m.eps)


def mod_of(fn_h, attrs):
    """A module as its functional form with the module's attributes as arguments."""
    def h(tr, n, m, a, kw):
        kw2 = dict(kw)
        for arg, attr in attrs.items():
            kw2[arg] = getattr(m, attr)
        return fn_h(tr, n, a, kw2)
    return h


def mod_dropout(tr, n, m, a, kw):
    if m.training and m.p > 0:
        raise Unsupported("%s with p=%g in training mode (random)" % (op_name(n, tr.gm), m.p), n.name)
    return a[0]


def mod_flatten(tr, n, m, a, kw):
    return make_flatten(tr, n, a[0], m.start_dim, m.end_dim)


def mod_softmax(log):
    def h(tr, n, m, a, kw):
        x = a[0]
        d = m.dim if m.dim is not None else (0 if len(x.shape) in (0, 1, 3) else 1)
        return make_softmax(tr, n, x, tr.dim(n, x, d), log, tr.dtype_of(n))
    return h


IP = ("inplace", False)
SOFTMAX_F = [("input", REQ), ("dim", None), ("_stacklevel", 3), ("dtype", None)]
SOFTMAX_T = [("input", REQ), ("dim", REQ), ("dtype", None)]

FUNCTIONS = {
    operator.add: binary("add"), operator.sub: binary("sub"), operator.mul: binary("mul"),
    operator.truediv: binary("div"), operator.pow: binary("pow"), operator.floordiv: binary("floordiv"),
    operator.neg: unary("neg"),
    torch.add: binary("add"), torch.sub: binary("sub"), torch.subtract: binary("sub"), torch.mul: binary("mul"),
    torch.multiply: binary("mul"), torch.div: binary("div"), torch.divide: binary("div"),
    torch.true_divide: binary("div"), torch.pow: binary("pow"),
    torch.maximum: binary("maximum"), torch.minimum: binary("minimum"),
    torch.neg: unary("neg"), torch.negative: unary("neg"), torch.abs: unary("abs"),
    torch.relu: unary("relu"), F.relu: unary("relu", inplace=False), F.relu6: unary("relu6", inplace=False),
    torch.sigmoid: unary("sigmoid"), F.sigmoid: unary("sigmoid"), torch.tanh: unary("tanh"), F.tanh: unary("tanh"),
    F.silu: unary("silu", inplace=False), F.mish: unary("mish", inplace=False),
    torch.exp: unary("exp"), torch.log: unary("log"), torch.sqrt: unary("sqrt"), torch.rsqrt: unary("rsqrt"),
    torch.erf: unary("erf"), torch.square: unary("square"), torch.reciprocal: unary("reciprocal"),
    F.softsign: unary("softsign"), F.hardsigmoid: unary("hardsigmoid", inplace=False),
    F.hardswish: unary("hardswish", inplace=False), F.selu: unary("selu", inplace=False),
    torch.selu: unary("selu"),
    F.gelu: param_unary([("approximate", "none")], gelu_f),
    F.leaky_relu: param_unary([("negative_slope", 0.01), IP], lambda p: ew(
        lambda a, ct, Fn, C: "(%s > %s ? %s : %s * %s)" % (a[0], C(0), a[0], a[0], C(p["negative_slope"])))),
    F.elu: param_unary([("alpha", 1.0), IP], lambda p: ew(
        lambda a, ct, Fn, C: "(%s > %s ? %s : %s * %s(%s))" % (a[0], C(0), a[0], C(p["alpha"]), Fn("expm1"), a[0]))),
    F.softplus: param_unary([("beta", 1.0), ("threshold", 20.0)], lambda p: ew(
        lambda a, ct, Fn, C: "(%s * %s > %s ? %s : %s(%s(%s * %s)) / %s)" % (
            a[0], C(p["beta"]), C(p["threshold"]), a[0], Fn("log1p"), Fn("exp"), a[0], C(p["beta"]), C(p["beta"])))),
    torch.clamp: clamp_h("min", "max", None, None), torch.clip: clamp_h("min", "max", None, None),
    F.hardtanh: clamp_h("min_val", "max_val", -1.0, 1.0),
    torch.sum: reduction("sum"), torch.mean: reduction("mean"), torch.prod: reduction("prod"),
    torch.max: reduction("max"), torch.min: reduction("min"),
    torch.amax: amax_h("amax"), torch.amin: amax_h("amin"),
    torch.argmax: reduction("argmax"), torch.argmin: reduction("argmin"),
    torch.softmax: softmax_h(SOFTMAX_T, False), F.softmax: softmax_h(SOFTMAX_F, False),
    torch.log_softmax: softmax_h(SOFTMAX_T, True), F.log_softmax: softmax_h(SOFTMAX_F, True),
    torch.matmul: matmul_h("matmul"), torch.mm: matmul_h("mm"), torch.bmm: matmul_h("bmm"),
    F.linear: matmul_h("linear"), F.layer_norm: layer_norm_h,
    torch.reshape: lambda tr, n, a, kw: make_reshape(tr, n, a[0], shape_arg(n, a[1:] or [kw.get("shape")])),
    torch.flatten: flatten_h, torch.unsqueeze: unsqueeze_h, torch.squeeze: squeeze_h,
    torch.transpose: transpose_h, torch.swapaxes: transpose_h, torch.permute: permute_fn, torch.t: t_h,
    F.dropout: dropout_h, torch.dropout: dropout_h,
    operator.getitem: getitem_h, getattr: getattr_h,
}

METHODS = {
    "add": binary("add"), "sub": binary("sub"), "mul": binary("mul"), "div": binary("div"),
    "true_divide": binary("div"), "pow": binary("pow"), "maximum": binary("maximum"), "minimum": binary("minimum"),
    "__radd__": reverse(binary("add")), "__rsub__": reverse(binary("sub")), "__rmul__": reverse(binary("mul")),
    "__rtruediv__": reverse(binary("div")), "__rpow__": reverse(binary("pow")),
    "neg": unary("neg"), "abs": unary("abs"), "relu": unary("relu"), "sigmoid": unary("sigmoid"),
    "tanh": unary("tanh"), "exp": unary("exp"), "log": unary("log"), "sqrt": unary("sqrt"),
    "rsqrt": unary("rsqrt"), "erf": unary("erf"), "square": unary("square"), "reciprocal": unary("reciprocal"),
    "clamp": clamp_h("min", "max", None, None), "clip": clamp_h("min", "max", None, None),
    "sum": reduction("sum"), "mean": reduction("mean"), "prod": reduction("prod"),
    "max": reduction("max"), "min": reduction("min"), "amax": amax_h("amax"), "amin": amax_h("amin"),
    "argmax": reduction("argmax"), "argmin": reduction("argmin"),
    "softmax": softmax_h(SOFTMAX_T, False), "log_softmax": softmax_h(SOFTMAX_T, True),
    "matmul": matmul_h("matmul"), "mm": matmul_h("mm"), "bmm": matmul_h("bmm"),
    "view": view_h, "reshape": view_h, "flatten": flatten_h, "unsqueeze": unsqueeze_h, "squeeze": squeeze_h,
    "transpose": transpose_h, "swapaxes": transpose_h, "permute": permute_method, "t": t_h,
    "contiguous": identity_h([("memory_format", None)]), "clone": identity_h([("memory_format", None)]),
    "float": cast_h(torch.float32), "double": cast_h(torch.float64), "half": cast_h(torch.float16),
    "bfloat16": cast_h(torch.bfloat16), "to": to_h,
    "size": size_h, "dim": dim_h, "numel": numel_h,
}

MODULES = {
    nn.ReLU: mod_unary("relu"), nn.ReLU6: mod_unary("relu6"), nn.Sigmoid: mod_unary("sigmoid"),
    nn.Tanh: mod_unary("tanh"), nn.SiLU: mod_unary("silu"), nn.Mish: mod_unary("mish"),
    nn.Softsign: mod_unary("softsign"), nn.Hardsigmoid: mod_unary("hardsigmoid"),
    nn.Hardswish: mod_unary("hardswish"), nn.SELU: mod_unary("selu"), nn.Identity: mod_unary("identity"),
    nn.GELU: mod_of(FUNCTIONS[F.gelu], {"approximate": "approximate"}),
    nn.LeakyReLU: mod_of(FUNCTIONS[F.leaky_relu], {"negative_slope": "negative_slope"}),
    nn.ELU: mod_of(FUNCTIONS[F.elu], {"alpha": "alpha"}),
    nn.Softplus: mod_of(FUNCTIONS[F.softplus], {"beta": "beta", "threshold": "threshold"}),
    nn.Hardtanh: mod_of(FUNCTIONS[F.hardtanh], {"min_val": "min_val", "max_val": "max_val"}),
    nn.Softmax: mod_softmax(False), nn.LogSoftmax: mod_softmax(True),
    nn.Linear: mod_linear, nn.LayerNorm: mod_layer_norm, nn.Dropout: mod_dropout, nn.Flatten: mod_flatten,
}


# ---- the kernel --------------------------------------------------------------------------
def signature(spec, lang, fn_name):
    ps = ["int %s" % v["name"] for v in spec.get("vars", [])]
    ps += ["const %s *%s" % (lang.storage[x["dtype"]], x["name"]) for x in spec["inputs"]]
    ps += ["const %s *%s" % (lang.storage[x["dtype"]], x["name"]) for x in spec.get("weights", [])]
    ps += ["%s *%s" % (lang.storage[x["dtype"]], x["name"]) for x in spec["outputs"]]
    return "%s(%s)" % (fn_name, ", ".join(ps))


def store(em, item, v):
    dt = item["dtype"]
    if dt == "f16":
        em.used.add("float_to_half")
        return "float_to_half(%s)" % v.e
    if dt == "bf16":
        em.used.add("float_to_bf16")
        return "float_to_bf16(%s)" % v.e
    ct = em.lang.storage[dt]
    return v.e if ct == v.ct else "(%s)%s" % (ct, v.e)


def loop_order(t):
    order = list(range(len(t.shape)))
    if t.loop_last is not None and t.loop_last in order:
        order.remove(t.loop_last)
        order.append(t.loop_last)
    return order


def nest(em, t, write):
    """Loops over t's shape (its loop_last innermost); write(idx) gives the body's last line."""
    order = loop_order(t)
    vars_ = em.open_loops([t.shape[k] for k in order])
    idx = [None] * len(order)
    for k, v in zip(order, vars_):
        idx[k] = v
    em.stack[-1].body.append(write(idx))
    em.close_loops(vars_)


def tensors_in_order(outs):
    """Every tensor the outputs reach, each after the tensors it reads."""
    seen, order = set(), []

    def visit(t):
        if id(t) in seen:
            return
        seen.add(id(t))
        for c in children(t):
            visit(c)
        order.append(t)
    for o in outs:
        visit(o)
    return order


def children(t):
    if isinstance(t, Ew):
        return [o for o in t.operands if isinstance(o, Tensor)]
    if isinstance(t, View):
        return [t.src]
    if isinstance(t, Reduce):
        return [t.src]
    if isinstance(t, Matmul):
        return [t.a, t.b]
    return []


def kernel_c(spec, outs, fn_name, header):
    L = Lang("c")
    em = Emitter(L, reserved_names(spec))
    temps = []
    for t in tensors_in_order(outs):
        if isinstance(t, (Load, View)) or not t.fx:
            continue
        only_output = t.is_output and t.uses == sum(1 for o in outs if o is t)
        if (t.heavy or t.uses > 1) and not only_output:
            buf = em.fresh("t")
            nest(em, t, lambda idx, t=t, buf=buf: "%s[%s] = %s;" % (buf, flat(idx, t.shape, L), t.emit(em, idx).e))
            t.buf = buf
            temps.append((buf, t))
    for o, item in zip(outs, spec["outputs"]):
        nest(em, o, lambda idx, o=o, item=item: "%s[%s] = %s;" % (
            item["name"], flat(idx, o.shape, L), store(em, item, em.value(o, idx))))
    lines = []
    render(em.stack[0], 1, lines)
    body = lines
    alloc, free = [], []
    for buf, t in temps:
        # one element more than the tensor has: malloc(0) may return NULL
        alloc.append("    %s *%s = malloc(sizeof(%s) * ((size_t)%s + 1));" % (t.ct, buf, t.ct, numel(t.shape).c(L)))
        free.append("    free(%s);" % buf)
    if temps:
        alloc.append("    if (%s) {" % " || ".join("!" + b for b, _ in temps))
        alloc.extend(["    " + f for f in free])
        alloc.append("        return;")
        alloc.append("    }")
    text = "\n".join(alloc + body + free)
    unused = ["    (void)%s;" % p for p in param_names(spec) if not re.search(r"\b%s\b" % p, text)]
    src = [header, "#include <math.h>", "#include <stdint.h>", "#include <stdlib.h>", ""]
    h = helpers(L, em.used)
    if h:
        src.append(h)
    src.append("void %s {" % signature(spec, L, fn_name))
    src.extend(unused + alloc + body + free)
    src.append("}")
    return "\n".join(src) + "\n"


def kernel_cuda(spec, outs, fn_name, header):
    L = Lang("cuda")
    em = Emitter(L, reserved_names(spec) | {"tid"})
    top = em.stack[0]
    n0 = numel(outs[0].shape).c(L)
    top.body.append("%s tid = (%s)blockIdx.x * blockDim.x + threadIdx.x;" % (L.idx, L.idx))
    top.body.append("if (tid >= %s) return;" % n0)
    top.defines.add("tid")
    for k, (o, item) in enumerate(zip(outs, spec["outputs"])):
        if k == 0:
            scope, flat_var = top, "tid"
        else:
            j = em.fresh("j")
            scope = Scope("for (%s %s = tid; %s < %s; %s += %s)" % (L.idx, j, j, numel(o.shape).c(L), j, n0), {j})
            em.stack.append(scope)
            flat_var = j
        idx = []
        for d in range(len(o.shape)):
            name = em.fresh("i")
            stride = numel(o.shape[d + 1:])
            e = flat_var if stride.is_one() else "%s / %s" % (flat_var, stride.c(L))
            if d > 0:
                e = "%s %% %s" % (e if stride.is_one() else "(%s)" % e, o.shape[d].c(L))
            scope.body.append(Decl(name, "%s %s = %s;" % (L.idx, name, e)))
            scope.defines.add(name)
            idx.append(E(name, {name}, L.idx))
        v = em.value(o, idx)
        scope.body.append("%s[%s] = %s;" % (item["name"], flat_var, store(em, item, v)))
        if k > 0:
            s = em.stack.pop()
            em.stack[-1].body.append(s)
    lines = []
    render(top, 1, lines)
    lines = finish_nested(lines)
    text = "\n".join(lines)
    unused = ["    (void)%s;" % p for p in param_names(spec) if not re.search(r"\b%s\b" % p, text)]
    src = [header, ""]
    h = helpers(L, em.used)
    if h:
        src.append(h)
    src.append('extern "C" __global__ void %s {' % signature(spec, L, fn_name))
    src.extend(unused + lines)
    src.append("}")
    return "\n".join(src) + "\n"


def finish_nested(lines):
    """Decls (a thread's index in one dim) kept only where read; indented like their block."""
    text = "\n".join(l for l in lines if not isinstance(l, Decl))
    out, depth = [], 1
    for l in lines:
        if isinstance(l, Decl):
            if re.search(r"\b%s\b" % l.name, text):
                out.append("    " * depth + l.text)
            continue
        out.append(l)
        s = l.strip()
        if s.endswith("{"):
            depth = (len(l) - len(l.lstrip())) // 4 + 1
        elif s == "}":
            depth = (len(l) - len(l.lstrip())) // 4
    return out


def param_names(spec):
    return [x["name"] for sect in ("vars", "inputs", "weights", "outputs") for x in spec.get(sect, [])]


def reserved_names(spec):
    names = set()
    for sect in ("vars", "inputs", "weights", "outputs"):
        names.update(x["name"] for x in spec.get(sect, []))
    return names


def check_outputs(spec, outs, where):
    if len(outs) != len(spec["outputs"]):
        raise StartError("%s: the model returns %d tensors, the spec lists %d outputs" % (where, len(outs), len(spec["outputs"])))
    for o, item in zip(outs, spec["outputs"]):
        if DTYPE_NAME.get(o.dtype) != item["dtype"]:
            raise StartError("%s: output %s is %s in the model, %s in the spec"
                             % (where, item["name"], DTYPE_NAME.get(o.dtype, str(o.dtype)), item["dtype"]))
        if numel(o.shape) != numel(dims_of(item)):
            raise StartError("%s: output %s has shape %s in the model, %s in the spec"
                             % (where, item["name"], o.shape, item["dims"]))


def start_kernel(model_path, spec, lang, fn_name=None, spec_where="spec"):
    """The start kernel's source for the model file and spec (a dict) in lang ("c" or "cuda")."""
    if lang not in ("c", "cuda"):
        raise StartError("language %r is neither c nor cuda" % lang)
    check_spec(spec, spec_where)
    if fn_name is None:
        fn_name = re.sub(r"\W", "_", os.path.splitext(os.path.basename(model_path))[0])
        if not re.match(r"^[A-Za-z_]", fn_name):
            fn_name = "k_" + fn_name
    model = load_model(model_path)
    gm, tensor_params, consts, n_args = trace(model, spec, model_path)
    seen = record(gm, spec, consts, n_args)
    tr = Translator(gm, spec, Lang(lang), tensor_params, seen, spec_where)
    outs = tr.run()
    check_outputs(spec, outs, spec_where)
    header = "/* %s: a plain start kernel written by kwb from %s (torch.fx trace); loops, no tuning. */" % (
        fn_name, os.path.basename(model_path))
    if lang == "c":
        return kernel_c(spec, outs, fn_name, header)
    return kernel_cuda(spec, outs, fn_name, header)


def main(argv):
    import json
    if len(argv) not in (4, 5) or argv[3] not in ("c", "cuda"):
        sys.stderr.write("usage: kwb_start.py MODEL.py SPEC.json c|cuda [FN]\n")
        return 2
    try:
        try:
            with open(argv[2]) as f:
                spec = json.load(f)
        except (OSError, ValueError) as e:
            raise StartError("%s: %s" % (argv[2], e))
        if not isinstance(spec, dict):
            raise StartError("%s: not a JSON object" % argv[2])
        src = start_kernel(argv[1], spec, argv[3], argv[4] if len(argv) == 5 else None, argv[2])
    except Unsupported as e:
        sys.stderr.write("kwb_start: %s\n" % e)
        return 2
    except StartError as e:
        sys.stderr.write("kwb_start: %s\n" % e)
        return 1
    sys.stdout.write(src)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
