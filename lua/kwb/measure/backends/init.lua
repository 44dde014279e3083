-- kwb/measure/backends/init.lua: what a backend adapter gives the loop, and the build every
-- adapter shares. An adapter (kwb/backends/NAME.lua) is a table of these
-- functions, checked when it is loaded; besides them the loop calls only
-- the optional ones below, where an adapter has them.
--
--   name                                  "host" | "cuda"
--   device()                           -> the device kind results are keyed by
--   buffer(dtype, n)                   -> a buffer on the device
--   compare(out, ref, tol)             -> { ok, max_abs, rel_l2, bad, poison, nan, inf, first_bad, ... }
--   clock()                            -> seconds: the clock a call's timeout is measured on
--   call(kernel, bench, args)          -> true | nil, message: one call with a shape's arguments
--   time(kernel, bench, opts, outs)    -> stats | nil, message: the timed runs of one shape
--                                         (outs: the outputs, which the adapter may poison
--                                         before every timed run)
--   ceilings(given)                    -> { bandwidth =, flops = } for the physical floor
--   reference(problem, dir, arch)      -> the problem's trusted reference as a kernel
--   and the build's steps, in the order build() takes them:
--   view(cand, recipe)                 -> the views to check before compiling (the host's
--                                         preprocessed source) | nil, message, info
--   check_view(rules, view)            -> a rule's hit | nil
--   compile(cand, recipe)              -> module | nil, message, { log = }
--   check_built(rules, module, cand, view) -> a rule's hit | nil (PTX, symbols)
--   entry(module, cand, recipe, prototype) -> kernel | nil, message [, outcome]
--                                         (compile-error unless it says: the host's
--                                         sandbox, forbidden by a module's constructor)
--   error_line                            a Lua pattern: the compile log's first error line
--   redzones (optional)                   true when buffer(...) returns buffers with
--                                         :redzone() (kwb.measure.verify checks them after every call)
--   guard_bands(bufs, outs) (optional)    every buffer's zones and the outputs' unwritten
--                                         counts in one look (kwb.measure.verify)
--   prebuild(cands, recipe) (optional)    starts the compiles of candidates about to be
--                                         measured in the background; a later compile(...)
--                                         of one finds it built (the cuda adapter: NVRTC);
--   prebuild_wait(limit) (optional)       waits up to limit seconds for them to finish
--   free_bytes() (optional)               the device memory free now (compute-sanitizer's
--                                         runs go as many at once as it holds)
--   hold(buf [, copy [, keep]]), release(buf) (optional)
--                                         expected outputs held off the device, the buffer
--                                         poisoned, and given back (the cuda adapter)
--   calls(kernel, sets, limit) (optional) one call on each bench of sets, queued at once
--                                         (the host's sandbox: kwb.measure.timed)
--   code_digest(module, cand) (optional) the built code as a digest (core.code_digest over
--                                         the host's shared object, the cuda adapter's cubin
--                                         with the launch plan's parameters), or nil where
--                                         it cannot be read: equal digests, equal code
--   fresh_timing, timed_call, verify_runs, pooled_checks (optional)
--                                         the timed runs through kwb.measure.timed: one call a
--                                         sample, the samples verified against the reference
--                                         (besides the last), their inputs from pool sets
local rules = require "kwb.measure.rules"
local core = require "kwb.core"

local M = {}

M.functions = { "device", "buffer", "compare", "clock", "call", "time", "ceilings", "reference",
                "view", "check_view", "compile", "check_built", "entry" }

-- check(adapter, name) -> adapter, or raises naming what is missing.
function M.check(adapter, name)
  if type(adapter) ~= "table" then error(string.format("backend %s: the adapter is a %s, not a table", name, type(adapter)), 2) end
  for _, f in ipairs(M.functions) do
    if type(adapter[f]) ~= "function" then
      error(string.format("backend %s: the adapter has no function %s (an adapter gives: %s)", name, f,
                          table.concat(M.functions, ", ")), 2)
    end
  end
  if adapter.name ~= name then error(string.format("backend %s: the adapter calls itself %s", name, tostring(adapter.name)), 2) end
  if type(adapter.error_line) ~= "string" then error(string.format("backend %s: the adapter has no error_line pattern", name), 2) end
  return adapter
end

local checked = {}

-- load(name) -> the checked adapter kwb/backends/NAME.lua.
function M.load(name)
  if checked[name] then return checked[name] end
  local ok, adapter = pcall(require, "kwb.measure.backends." .. name)
  if not ok then error(string.format("the loop has no %s backend in this build: %s", name, tostring(adapter)), 0) end
  checked[name] = M.check(adapter, name)
  return checked[name]
end

local function compile_error(res, msg, info, pattern)
  local log = info and info.log or ""
  local first = log:match(pattern)
  res.outcome, res.reason, res.log = "compile-error", first and (msg .. ": " .. first) or msg, log
end

-- build(adapter, cand, recipe, prototype, res [, codes]) -> kernel, or nil
-- with res filled in ("forbidden" with the rule, or "compile-error" with the
-- log): rules over the source, the views before compiling, the compiler, the
-- views of what it built, the entry points. A build that passes the rules
-- has its code's digest in res.code (the adapter's code_digest, where it
-- has one); where codes (a set of digests: code measured already) holds it,
-- the candidate is "duplicate" and goes no further (its entry points, where
-- the host's sandbox starts, are the code's it repeats).
function M.build(adapter, cand, recipe, prototype, res, codes)
  local rs = recipe.rules
  local t0 = core.now()
  local hit = rs:check_source(cand.source)
  if hit then rules.forbid(res, hit); return nil end
  local view, msg, info = adapter.view(cand, recipe)
  if not view then res.outcome, res.reason, res.log = "compile-error", msg, info and info.log; return nil end
  hit = adapter.check_view(rs, view)
  if hit then rules.forbid(res, hit); return nil end
  local mod
  mod, msg, info = adapter.compile(cand, recipe)
  res.seconds.build = core.now() - t0
  if not mod then compile_error(res, msg, info, adapter.error_line); return nil end
  hit = adapter.check_built(rs, mod, cand, view)
  if hit then rules.forbid(res, hit); return nil end
  res.code = adapter.code_digest and adapter.code_digest(mod, cand) or nil
  if res.code and codes and codes[res.code] then
    res.outcome, res.reason = "duplicate", "its built code is code measured before"
    return nil
  end
  local kernel, why, outcome = adapter.entry(mod, cand, recipe, prototype)
  if not kernel then res.outcome, res.reason = outcome or "compile-error", why; return nil end
  return kernel
end

return M
