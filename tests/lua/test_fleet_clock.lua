-- tests/lua/test_fleet_clock.lua: the run's end crosses to a worker as
-- seconds left, never as the loop's monotonic time, which a fleet's worker
-- would compare with another host's clock (the start kernel's shapes then
-- stopped at once, or never). kwb.worker.task is run here in-process, as a
-- worker runs it, on the start kernel of recipes/host_matmul.lua.
local t = require "t"
local core = require "kwb.core"
local task = require "kwb.worker.task"

local recipe = core.cwd() .. "/recipes/host_matmul.lua"
local r = kwb.load(recipe)
local s = r:session()
local start = s:candidate(r.start, "start")
-- a task's arguments, its request's fields set from `req`
local function args(req)
  local a = { recipe = recipe, seed = "1", req = require("kwb.measure").request(r, { run_seed = 1, start = true }),
              cand = { source = start.source, name = start.name, defines = start.defines,
                       define_list = start.define_list, params = start.params, id = start.id, short = start.short } }
  for k, v in pairs(req) do a.req[k] = v end
  return a
end
local n = #r.shapes

t.test("fleet_clock_no_seconds_left_stops_the_start_kernel_before_its_next_shape", function()
  local res = task.measure(args { time_left = 0 })
  t.eq(res.outcome, "timeout")
  t.eq(res.reason, string.format("the run's budget.minutes ran out before %s (%d timed and %d unannounced shapes to "
                                 .. "check): give fewer or smaller shapes, or more minutes", r.shapes[1].key, n,
                                 #r.verify_shapes))
end)

-- The loop's absolute time (here one long past, as another host's monotonic
-- clock may read it) is not the run's end; the seconds left are.
t.test("fleet_clock_an_absolute_time_from_another_clock_is_not_the_runs_end", function()
  local res = task.measure(args { ends_at = core.now() - 1e6, deadline = core.now() - 1e6, time_left = 600 })
  t.eq(res.outcome, nil)
  local shapes = 0
  for _ in pairs(res.shapes) do shapes = shapes + 1 end
  t.eq(shapes, n, "every shape measured")
end)

-- What a session sends: seconds left to the run's end, reckoned when the
-- task is (re)sent, and no absolute time.
t.test("fleet_clock_a_session_sends_seconds_left", function()
  local sent
  s.pool = { submit = function(_, fn, a) sent = { fn = fn, args = a[1] }; return {} end }
  s.ends_at = core.now() + 100
  s:submit(start, { start = true })
  t.eq(sent.fn, "kwb.worker.task.measure")
  t.eq(sent.args.req.deadline, nil, "no absolute time")
  t.eq(sent.args.req.ends_at, nil, "no absolute time")
  t.truthy(sent.args.req.time_left > 99 and sent.args.req.time_left <= 100, tostring(sent.args.req.time_left))
end)

t.done()
