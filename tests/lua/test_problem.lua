-- tests/lua/test_problem.lua: problem specs: prototypes, shape expressions,
-- the work a shape does, and the mistakes a spec can make.
local t = require "t"
local problem = require "kwb.problem"

t.test("problem_matmul_prototype_and_work", function()
  local p = require("kwb.problems.matmul") {}
  t.eq(p:prototype(), "void matmul(int n, const float *a, const float *b, float *c)")
  t.eq(p:bytes_of { n = 10 }, 1200)
  t.eq(p:flops_of { n = 10 }, 2000)
  t.eq(p:shape_key { n = 10 }, "n=10")
  t.eq(p.args[4].size { n = 7 }, 49)
  t.eq(p.args[2].role, "in"); t.eq(p.args[4].role, "out")
end)

t.test("problem_vecadd_launch_plan", function()
  local p = require("kwb.problems.vecadd") {}
  local plan = p.launch { n = 1000 }
  t.eq(plan.grid[1], 4); t.eq(plan.block[1], 256)
  t.eq(p:prototype(), "void vecadd(int n, const float *a, const float *b, float *c)")
end)

t.test("problem_shape_expressions_use_math_and_every_variable", function()
  local p = problem.define { name = "gemv", vars = { "M", "K" }, reference = function() end,
    args = { { "M", "i64", value = "M" }, { "x", "f64", shape = "max(M, K) * 2", role = "inout" } },
    flops = function(s) return 2 * s.M * s.K end }
  t.eq(p.args[2].size { M = 3, K = 5 }, 10)
  t.eq(p:prototype(), "void gemv(int64_t M, double *x)")
  t.eq(p:shape_key { M = 3, K = 5 }, "M=3,K=5")
  t.eq(p:flops_of { M = 3, K = 5 }, 30)
  t.eq(p:bytes_of { M = 3, K = 5 }, nil)
end)

t.test("problem_mistakes_are_named", function()
  t.raises(function() problem.define { name = "x", vars = { "n" }, reference = function() end,
    args = { { "a", "f32", shape = "n*m", role = "in" } } }.args[1].size { n = 2 } end,
    "unknown shape variable 'm' in x argument 'a' shape 'n*m'")
  t.raises(function() problem.define { name = "x", vars = { "n" }, reference = function() end,
    args = { { "a", "f33", shape = "n" } } } end, "dtype must be one of f32")
  t.raises(function() problem.define { name = "x", vars = { "n" }, reference = function() end,
    args = { { "a", "f32", shape = "n", role = "output" } } } end, "role must be 'in', 'out' or 'inout', got output")
  t.raises(function() problem.define { name = "x", vars = { "n" }, args = { { "n", "i32", value = "n" } } } end,
    "'reference' must be a Lua function or { source = | file =, fn =, cuda = }")
  t.raises(function() require("kwb.problems.matmul") { tol = 1 } end, "matmul: unknown option 'tol' (known: tolerance)")
  local p = require("kwb.problems.matmul") {}
  local ok, err = p:check_shape { n = 0 }
  t.eq(ok, nil); t.eq(err, "shape variable 'n' must be a positive integer, got 0")
end)

t.test("problem_vecadd_runs_through_the_loop_exactly", function()
  local dir = os.getenv("KWB_CACHE"):match("^(.*)/[^/]*$")
  for _, suffix in ipairs { "", "-wal", "-shm" } do os.remove(dir .. "/vecadd.db" .. suffix) end
  local r = kwb.recipe {
    name = "vecadd_host", problem = "vecadd", shapes = { n = { 1000, 4096 } },
    start = { source = "void vecadd(int n, const float *a, const float *b, float *c) {\n"
                    .. "  for (int i = 0; i < n; i++) c[i] = a[i] + b[i];\n}\n" },
    strategy = { propose = function(self)
      if self.done then return nil end
      self.done = true   -- off by one: the last element is never written
      return { source = "void vecadd(int n, const float *a, const float *b, float *c) {\n"
                     .. "  for (int i = 0; i + 1 < n; i++) c[i] = a[i] + b[i];\n}\n" }
    end },
    timing = { warmup = 0.001, min_samples = 3, cap = 0.01, target = 0.1 },
  }
  local sm, run = r:run { mode = "quiet", store = require("kwb.loop.store").open(dir .. "/vecadd.db") }
  t.eq(sm.funnel.wrong, 1)
  t.eq(run.results[1].reason, "output c at n=1000 (the first run): 1 element never written, first c[1000]")
end)

t.done()
