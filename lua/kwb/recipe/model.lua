-- kwb/recipe/model.lua: the recipe's `model` field checked (kwb.recipe
-- calls it with its Checker): a provider of kwb.model's, what that provider
-- needs (a model name, a program on PATH, a transcript file that reads), an
-- http(s) base_url, fallbacks checked the same way, prices in currency units
-- per million tokens, profile (the best's ncu profile in the prompt) a boolean,
-- diff_bytes (a parent longer than this is changed by edits) a positive integer,
-- lessons_every (candidates between the lessons ledger's summaries, 0: none) a
-- whole number, lessons_bytes (the lessons a prompt holds) a positive one.
-- Or a list of such models (kwb.model.several: a bandit chooses one per
-- request), the prompt's and the ledger's settings (context_bytes, profile,
-- diff_bytes, lessons_every, lessons_bytes) then on the list, for all of them.
local nearest = require "kwb.base.nearest"

return function(checks)
  local positive_integer, positive_number, nonneg_number, a_string, is_array =
    checks.positive_integer, checks.positive_number, checks.nonneg_number, checks.a_string, checks.is_array
  local price_spec = { names = { "input", "output" }, check = { input = nonneg_number, output = nonneg_number } }
  local model_spec
  local function model_check(c, f, v)
    c:subtable(f, v, model_spec)
    local p, known = v.provider, require("kwb.model").providers
    local near = nearest(p, known)
    if near ~= p then c:fail(f .. ".provider", "one of " .. table.concat(known, ", "), p, near and ("(did you mean '" .. near .. "'?)")) end
    if (p == "openai" or p == "anthropic") and v.model == nil then c:fail(f .. ".model", "a model name (required)", nil) end
    if p == "openai" and v.temperature ~= nil and v.temperature ~= 1 and require("kwb.model.providers.openai").reasoning(v.model) then
      c:fail(f .. ".temperature", string.format("no temperature: %s is a reasoning model, which takes only "
                                                .. "the default (1)", v.model), false)
    end
    if p == "command" then
      if v.command == nil then c:fail(f .. ".command", "the program and its arguments (required)", nil) end
      if not require("kwb.base.files").which(v.command[1]) then
        c:fail(f .. ".command[1]", "a program on PATH", v.command[1])
      end
    end
    if p == "replay" then
      if v.file == nil then c:fail(f .. ".file", "the transcript file to replay (required)", nil) end
      v.file = c:path(f .. ".file", v.file)
      local ok, err = pcall(require("kwb.model.providers.replay").load, v.file)
      if not ok then c:fail(f .. ".file", tostring(err), false) end
    end
    if v.base_url ~= nil and not v.base_url:match("^https?://[^/]") then
      c:fail(f .. ".base_url", "an http:// or https:// URL", v.base_url)
    end
  end
  local function a_fallback(c, f, v)
    if type(v) ~= "table" then c:fail(f, "a model table or a list of them", v) end
    if v.provider ~= nil then return model_check(c, f, v) end
    for i, m in ipairs(v) do model_check(c, f .. "[" .. i .. "]", m) end
  end
  local function an_argv(c, f, v)
    if not is_array(v) or #v == 0 then c:fail(f, "a list: the program, then its arguments", v) end
    for i, a in ipairs(v) do
      if type(a) ~= "string" then c:fail(f .. "[" .. i .. "]", "a string", a) end
    end
  end
  local function a_boolean(c, f, v) if type(v) ~= "boolean" then c:fail(f, "true or false", v) end end
  local function a_count(c, f, v)
    if math.type(v) ~= "integer" or v < 0 then c:fail(f, "a whole number of candidates (0: no summaries)", v) end
  end
  model_spec = { names = { "provider", "model", "key_env", "base_url", "temperature", "max_tokens", "fallback", "price",
                           "command", "timeout", "file", "context_bytes", "profile", "diff_bytes", "lessons_every",
                           "lessons_bytes" },
                 required = { "provider" },
                 check = { provider = a_string, model = a_string, key_env = a_string, base_url = a_string,
                           temperature = nonneg_number, max_tokens = positive_integer, fallback = a_fallback,
                           price = function(c, f, v) c:subtable(f, v, price_spec) end, command = an_argv,
                           timeout = positive_number, file = a_string, context_bytes = positive_integer,
                           profile = a_boolean, diff_bytes = positive_integer, lessons_every = a_count,
                           lessons_bytes = positive_integer } }
  -- the list form: several models, the shared settings beside them
  local shared = { "context_bytes", "profile", "diff_bytes", "lessons_every", "lessons_bytes" }
  local function models_check(c, f, v)
    if not require("kwb.model.several").is_list(v) then return model_check(c, f, v) end
    local names = { "[1]", "[2]", "..." }
    for _, k in ipairs(shared) do names[#names + 1] = k end
    for k in pairs(v) do
      if math.type(k) ~= "integer" and not model_spec.check[k] or math.type(k) == "integer" and (k < 1 or k > #v) then
        c:unknown(k, names, f .. ".")
      end
      if math.type(k) ~= "integer" then
        local ok = false
        for _, n in ipairs(shared) do ok = ok or n == k end
        if not ok then c:fail(f .. "." .. k, "a setting of each model (on the list only: " .. table.concat(shared, ", ") .. ")",
                              false) end
        model_spec.check[k](c, f .. "." .. k, v[k])
      end
    end
    for i, m in ipairs(v) do
      model_check(c, f .. "[" .. i .. "]", m)
      for _, k in ipairs(shared) do
        if m[k] ~= nil then
          c:fail(f .. "[" .. i .. "]." .. k, string.format("set on the list of models, not on one of them (%s is "
                                                          .. "the prompt's or the ledger's, the same for all)", k), false)
        end
      end
    end
  end
  return models_check
end
