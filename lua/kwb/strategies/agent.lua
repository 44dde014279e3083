-- kwb/strategies/agent.lua: the model works with tools, several turns per
-- proposal, through the providers' tool interfaces (OpenAI tool_calls,
-- Anthropic tool_use):
--
--   compile { source }           the build's outcome and compiler output (rules first)
--   evaluate { source, shape }   the whole harness on the source (a candidate: recorded,
--                                counted in the budget); the answer gives the verdict and
--                                the asked shape's time, or every shape's
--   best {}                      the current best source and its per-shape table
--   read_context { file }        one of the recipe's context documents
--
-- A reply with no tool calls ends the proposal: its code block is the
-- candidate (or no-code). After options.turns turns (6 by default), or once
-- the run's time is up, the model is asked for its answer with tool_choice
-- "none" (the tools stay defined while the conversation holds tool calls:
-- Anthropic's API refuses tool_use blocks without them); at most
-- calls_per_turn calls are answered a turn, and evaluate leaves the
-- budget's last candidate for the answer.
local core = require "kwb.core"
local llm = require "kwb.strategies.llm"
local prompt = require "kwb.strategies.prompt"
local figures = require "kwb.figures"

local S = setmetatable({ name = "agent", mode = "agent", turns = 6 }, { __index = llm })

local function schema(props, required)
  return { type = "object", properties = props, required = required }
end

S.tools = {
  { name = "compile", description = "Compile a kernel source through the harness's rules and compiler; returns ok or the error.",
    parameters = schema({ source = { type = "string", description = "the whole kernel file" } }, { "source" }) },
  { name = "evaluate", description = "Verify and time a kernel source on every shape (it counts as a candidate); "
      .. "returns the verdict and the time of the shape asked for, or of every shape.",
    parameters = schema({ source = { type = "string" }, shape = { type = "string", description = "e.g. n=128" } },
                        { "source" }) },
  { name = "best", description = "The current best kernel's source and its per-shape times.",
    parameters = schema({ detail = { type = "string", description = "unused; send an empty string" } }) },
  { name = "read_context", description = "Read one of the recipe's context documents in full.",
    parameters = schema({ file = { type = "string", description = "its file name" } }, { "file" }) },
}

function S:init(run)
  local ok, provider = run:open_model():tools()
  if not ok then
    error(string.format("the agent strategy needs a model that takes tool calls; provider '%s' does not "
                        .. "(use llm, or openai / anthropic)", provider), 0)
  end
  self.model = run:open_model()
  self.turns = (self.options or {}).turns or self.turns
end

local function result_text(run, res, shape)
  local lines = { string.format("%s: %s%s", res.short, res.outcome, res.reason and (": " .. res.reason) or "") }
  if res.score then lines[#lines + 1] = string.format("score %.3fx the start kernel", res.score) end
  for _, sh in ipairs(run.recipe.shapes) do
    local r = res.shapes[sh.key]
    if r and (not shape or shape == sh.key) then
      lines[#lines + 1] = string.format("%s: %s (%.2fx)", sh.key, figures.time(r.median), r.speedup or 1)
    end
  end
  return table.concat(lines, "\n")
end

-- Run one tool call -> the text that goes back to the model.
function S:call(run, c, parent)
  local a = c.arguments
  if type(a) ~= "table" then return "error: the arguments are not a JSON object" end
  if c.name == "compile" then
    if type(a.source) ~= "string" then return "error: compile needs 'source'" end
    return run:compile { source = a.source, name = "agent.c" }
  elseif c.name == "evaluate" then
    if type(a.source) ~= "string" then return "error: evaluate needs 'source'" end
    -- the last candidate of the budget is the answer's
    if run:budget_left() < 2 then return "error: the run's candidate budget is spent; give your answer" end
    local res = run:evaluate_now { source = a.source, name = "agent.c", model = self.reply_model,
                                   transcript = self.reply_transcript, parent = parent, origin = "agent" }
    local shape = type(a.shape) == "string" and a.shape ~= "" and a.shape or nil
    return result_text(run, res, shape)
  elseif c.name == "best" then
    local info = prompt.info(run)
    return prompt.parts(info, "agent").best or "no best yet"
  elseif c.name == "read_context" then
    for _, path in ipairs(run.recipe.context) do
      if type(a.file) == "string" and path:match("[^/]+$") == a.file:match("[^/]+$") then
        local f = io.open(path, "r")
        local text = f and f:read("a") or ""
        if f then f:close() end
        return text:sub(1, prompt.context_bytes)
      end
    end
    local names = {}
    for i, path in ipairs(run.recipe.context) do names[i] = path:match("[^/]+$") end
    return "error: no such context document (there are: " .. table.concat(names, ", ") .. ")"
  end
  return "error: no tool named " .. tostring(c.name)
end

-- Tool calls answered per turn; more get an error each.
S.calls_per_turn = 8

function S:propose(run)
  if run:spent() or run:budget_left() < 1 or core.now() >= run.ends_at then return nil end
  local convo = prompt.build(run, { mode = "agent" })
  convo.tools = S.tools
  local parent = convo.parent and convo.parent.id
  local first   -- (several models: the first turn's request chooses one, every later turn goes to it)
  for turn = 1, self.turns + 1 do
    -- the last turn, or the run's time is up: an answer, no more tool calls
    local final = turn > self.turns or core.now() >= run.ends_at
    if final then
      convo.tool_choice = "none"
      if turn == 1 then convo.tools = nil end   -- (no tool call in the conversation yet)
    end
    local ticket = self.model:ask(convo, "agent", first and first.arm)
    first = first or ticket
    local r = self.model:wait(ticket)
    if r.error then
      if self:gives_up(run, r) then return nil end
      return self:propose(run)
    end
    self.failed = 0
    self.reply_model, self.reply_transcript = r.model, r.transcript
    if #r.tool_calls == 0 or final then
      local prop = llm.proposal(run, r, parent, "agent", convo.parent_source)
      prop.space = nil   -- the answer is a kernel; a space goes with llm+tune
      self.from = self.from or {}
      self.from[run:id(prop)] = first
      return prop
    end
    convo.messages[#convo.messages + 1] = { role = "assistant", content = r.text, tool_calls = r.tool_calls }
    for i, c in ipairs(r.tool_calls) do
      local ok, out = true, string.format("error: at most %d tool calls a turn", S.calls_per_turn)
      if i <= S.calls_per_turn and core.now() < run.ends_at then ok, out = pcall(self.call, self, run, c, parent)
      elseif i <= S.calls_per_turn then out = "error: the run's time is up; give your answer" end
      if not ok then out = "error: " .. tostring(out) end
      convo.messages[#convo.messages + 1] = { role = "tool", tool_call_id = c.id, name = c.name, content = out }
    end
    if run:spent() then return nil end
  end
end

-- (several models: an accepted answer rewards the model of its conversation)
function S:observe(run, res, fresh)
  local t = self.from and self.from[res.id]
  if t and res.outcome == "accepted" and fresh and self.model.reward then self.model:reward(t) end
end

return S
