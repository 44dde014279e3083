-- kwb/measure/ptx.lua: what a CUDA module's PTX does, read from its text: the
-- .global variables it writes, the special registers it reads and the
-- instructions it uses (kwb.measure.rules judges them; PTX ISA 9.0, "Special
-- Registers" and the instruction set chapters, names what exists).
local M = {}

-- Special registers a kernel may read: its place in the grid and the
-- grid's shape, lanes and warps, clusters, its shared memory sizes.
-- Anything else (%clock, %clock64, %globaltimer, %pm0-7, %envreg0-31,
-- %smid, %gridid, %current_graph_exec, ...) is refused.
M.allowed_registers = {}
for _, r in ipairs { "tid", "ntid", "ctaid", "nctaid", "laneid", "warpid", "nwarpid", "warpsz",
                     "lanemask_eq", "lanemask_le", "lanemask_lt", "lanemask_ge", "lanemask_gt",
                     "clusterid", "nclusterid", "cluster_ctaid", "cluster_nctaid", "cluster_ctarank",
                     "cluster_nctarank", "is_explicit_cluster", "total_smem_size", "aggr_smem_size",
                     "dynamic_smem_size" } do
  M.allowed_registers[r] = true
end

-- Instructions no kernel needs and a hostile one uses: stopping or pausing
-- the device, the performance monitor.
M.refused_instructions = { trap = true, brkpt = true, nanosleep = true, pmevent = true, exit = true }

-- lines(text) -> an iterator of line number, line (empty lines included).
function M.lines(text)
  local iter, n = (text .. "\n"):gmatch("([^\n]*)\n"), 0
  return function()
    local l = iter()
    if l then n = n + 1; return n, l end
  end
end

-- instructions(ptx) -> { { line =, op =, operands = { ... }, fn = } }: the lines
-- inside function bodies that are instructions (not directives, labels or
-- braces), with a predicate guard and comments dropped.
function M.instructions(ptx)
  local out, fn = {}, 0
  for n, l in M.lines(ptx) do
    if l:match("^%s*%.visible%s+%.entry") or l:match("^%s*%.entry") or l:match("^%s*%.visible%s+%.func")
       or l:match("^%s*%.func") or l:match("^%s*%.weak%s+%.func") then
      fn = fn + 1   -- registers are named per function
    end
    local s = l:gsub("//.*$", ""):gsub("^%s+", ""):gsub("%s+$", "")
    s = s:gsub("^@!?%%?[%w_]+%s+", "")
    local op, rest = s:match("^([%a_][%w_:%.]*)%s*(.-);$")
    if op and not s:match("^%.") then
      local operands, depth, cur = {}, 0, {}
      for ch in rest:gmatch(".") do
        if ch == "[" or ch == "{" then depth = depth + 1 elseif ch == "]" or ch == "}" then depth = depth - 1 end
        if ch == "," and depth == 0 then
          operands[#operands + 1] = table.concat(cur):gsub("^%s+", ""):gsub("%s+$", "")
          cur = {}
        else cur[#cur + 1] = ch end
      end
      if #cur > 0 then operands[#operands + 1] = table.concat(cur):gsub("^%s+", ""):gsub("%s+$", "") end
      out[#out + 1] = { line = n, op = op, operands = operands, fn = fn }
    end
  end
  return out
end

-- globals(ptx) -> { name = line } of the module's .global variables.
function M.globals(ptx)
  local g = {}
  for n, l in M.lines(ptx) do
    local var = l:match("^%s*%.global%s.-([%a_$][%w_$]*)%s*[%[;=]")
             or l:match("^%s*%.visible%s+%.global%s.-([%a_$][%w_$]*)%s*[%[;=]")
             or l:match("^%s*%.weak%s+%.global%s.-([%a_$][%w_$]*)%s*[%[;=]")
    if var then g[var] = n end
  end
  return g
end

local writes = { st = true, atom = true, red = true, cp = true, stmatrix = true, sust = true, sured = true }

-- The global, or the register (of function fn) derived from one, that a
-- piece of an operand names.
local function derived(text, globals, taint, fn)
  for tok in text:gmatch("[%%$]?[%a_][%w_$]*") do
    if globals[tok] then return tok end
    if taint[fn .. tok] then return taint[fn .. tok] end
  end
end

-- written_global(ptx) -> name, ptx line | nil: a .global variable the module
-- writes (stores, atomics, reductions, bulk copies to it), directly or
-- through any register computed from its address (the taint runs through
-- every instruction but loads, until nothing changes), or whose address it
-- stores or passes on, which could be written anywhere. A variable only read
-- (a `__device__ const` table) is not state.
function M.written_global(ptx)
  local globals = M.globals(ptx)
  if not next(globals) then return nil end
  local insts, taint = M.instructions(ptx), {}
  local changed = true
  while changed do
    changed = false
    for _, ins in ipairs(insts) do
      local family = ins.op:match("^[%a]+")
      local ops = ins.operands
      if writes[family] or family == "call" then   -- written, or its address handed to a function
        for _, o in ipairs(ops) do
          local g = derived(o, globals, taint, ins.fn)
          if g then return g, ins.line end
        end
      elseif family ~= "ld" and ops[1] and ops[1]:match("^%%") then
        for i = 2, #ops do
          local g = derived(ops[i], globals, taint, ins.fn)
          local key = ins.fn .. ops[1]
          if g and taint[key] ~= g then taint[key], changed = g, true end
        end
      end
    end
  end
  return nil
end

-- special_register(ptx) -> name, ptx line | nil: the first special register
-- read that is not allowed. Virtual registers are those the .reg lines
-- declare (%r<9> gives %r1 ..., or one name).
function M.special_register(ptx)
  local declared, prefixes = {}, {}
  for l in ptx:gmatch("[^\n]+") do
    local body = l:match("^%s*%.reg%s+[^%%]*(.-);")
    if body then
      for name in body:gmatch("(%%[%a_$][%w_$]*)") do
        if body:find(name .. "<", 1, true) then prefixes[name] = true else declared[name] = true end
      end
    end
  end
  for n, l in M.lines(ptx) do
    local s = l:gsub("//.*$", "")
    if not s:match("^%s*%.reg") then
      for name in s:gmatch("(%%[%a_][%w_]*)") do
        local base = name:match("^(%%[%a_]+)%d+$")
        if not (declared[name] or (base and prefixes[base])) then
          local reg = name:sub(2):match("^(.-)%.?[xyz]?$")
          if not (M.allowed_registers[name:sub(2)] or M.allowed_registers[reg]) then return name, n end
        end
      end
    end
  end
  return nil
end

-- Functions no candidate may call: the device heap outlives the candidate
-- in its worker's context, so a block freed by one call and handed back to
-- the next (or to the next candidate) carries state across them.
M.refused_calls = { malloc = true, free = true, __nv_aligned_device_malloc = true }

-- refused_instruction(ptx) -> op, ptx line | nil (for a call: "call malloc",
-- at the line that names the callee: NVRTC spreads a call over lines)
function M.refused_instruction(ptx)
  for _, ins in ipairs(M.instructions(ptx)) do
    local base = ins.op:match("^[%a_]+")
    if M.refused_instructions[base] then return ins.op, ins.line end
  end
  local declared, first = {}, nil
  for n, l in M.lines(ptx) do
    local rest = l:match("^%s*%.extern%s+%.func%s*(.*)$")
    if rest then
      local name = rest:gsub("%b()", ""):match("([%a_$][%w_$]*)")
      if name and M.refused_calls[name] then declared[name] = true end
    else
      local callee = l:match("^%s*([%a_$][%w_$]*)%s*,?%s*$")
      if callee and declared[callee] and not first then first = { "call " .. callee, n } end
    end
  end
  if first then return first[1], first[2] end
  return nil
end

return M
