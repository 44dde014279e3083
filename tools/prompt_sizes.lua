-- tools/prompt_sizes.lua: the size of the first prompt of recipes/nvfp4_moe.lua
-- with a request for edits (its parent is over model.diff_bytes) and with a
-- request for the whole file, and of a reply either way: the transcript's
-- first reply (recipes/transcripts/nvfp4_moe.json, a whole file) against the
-- same change given as edits of the parent the prompt shows (its hunks
-- against kernels/nvfp4_moe/w4a16.cu, as `diff -U3` finds them). Built as
-- `kwb prompt` builds it, from the cache's results of DEVICE (default: an
-- H100's kind; with no GPU here, no floors and no start-kernel times).
--   ./kwb --cache "$(mktemp -d)/kwb.db" tools/prompt_sizes.lua ['NVIDIA H100 80GB HBM3 sm_90']
local cjson = require "cjson"
local cp = require "kwb.cli.prompt"
local edits = require "kwb.strategies.edits"
local reply = require "kwb.strategies.reply"

local device = ... or "NVIDIA H100 80GB HBM3 sm_90"
local recipe = require("kwb.load").load("recipes/nvfp4_moe.lua")

local function read(path)
  local f = assert(io.open(path, "rb"))
  local s = f:read("a")
  f:close()
  return s
end

local function line(what, bytes) print(string.format("%-58s %7d bytes, about %5d tokens", what, bytes, bytes // 4)) end

local convo, f = cp.build(recipe, { device = device })
for _, n in ipairs(f.notes) do print("note: " .. n) end
line("prompt asking for edits (the parent " .. #convo.parent_source .. " bytes)", f.bytes)
local keep = recipe.model.diff_bytes
recipe.model.diff_bytes = 1 << 30
local _, whole = cp.build(recipe, { device = device })
recipe.model.diff_bytes = keep
line("prompt asking for the whole file", whole.bytes)

local text = cjson.decode(read("recipes/transcripts/nvfp4_moe.json")).replies[1].text
local p = reply.parse(text)
local kernel, space
for _, b in ipairs(p.blocks) do
  if b.lang == "cuda" then kernel = b.code elseif b.lang == "lua" then space = b.code end
end
local template = read("kernels/nvfp4_moe/w4a16.cu")
local a, b = os.tmpname(), os.tmpname()
for path, s in pairs { [a] = template, [b] = kernel } do
  local out = assert(io.open(path, "wb"))
  out:write(s)
  out:close()
end
local pipe = assert(io.popen(string.format("diff -U3 '%s' '%s'", a, b)))
local diff = pipe:read("a")
pipe:close()
os.remove(a)
os.remove(b)
local hunks = assert(edits.find(diff), "the reply's kernel is the template")
local blocks = {}
for i, e in ipairs(hunks) do
  local s = #e.search > 0 and table.concat(e.search, "\n") .. "\n" or ""
  local r = #e.replace > 0 and table.concat(e.replace, "\n") .. "\n" or ""
  blocks[i] = "<<<<<<< SEARCH\n" .. s .. "=======\n" .. r .. ">>>>>>> REPLACE\n"
end
local lua = "```lua\n" .. space .. "```\n"
local as_blocks = p.prose .. "\n\n" .. table.concat(blocks, "\n") .. "\n" .. lua
local as_diff = p.prose .. "\n\n```diff\n" .. diff .. "```\n\n" .. lua
line("reply 1 whole (its kernel " .. #kernel .. " bytes)", #text)
line(string.format("reply 1 as %d SEARCH/REPLACE block%s", #hunks, #hunks == 1 and "" or "s"), #as_blocks)
line("reply 1 as a unified diff", #as_diff)
-- the edits apply to the parent the prompt shows, and make the reply's kernel of the template
local parent = { source = convo.parent_source, short = "start" }
for what, r in pairs { ["SEARCH/REPLACE"] = as_blocks, ["unified diff"] = as_diff } do
  local prop = reply.proposal(r, recipe, parent)
  print(string.format("%s against the parent shown: %s", what, prop.no_code or ("applies (" .. #prop.source .. " bytes)")))
end
print("the edits of the template give the reply's kernel: " .. tostring(edits.apply(template, hunks) == kernel))
