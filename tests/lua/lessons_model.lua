-- tests/lua/lessons_model.lua: a deterministic stand-in for a model, the
-- `command` provider's program in tests/recipes/lessons_host.lua (run as
-- `./kwb tests/lua/lessons_model.lua`, the prompt on stdin, the reply on stdout).
--
-- It knows four loop orders of the matmul, j-i-k, j-k-i, k-j-i and i-k-j, and
-- proposes them in that order, one a request, each reply's first line
-- "order NAME"; the orders proposed in a run are kept in the file
-- $KWB_TEST_LESSONS_STATE, one a line. Where the prompt's lessons part holds
-- "Loop order NAME was the fastest", that order goes first. A summary's
-- request of the lessons ledger (kwb.strategies.lessons) is answered with one
-- lesson naming the order of the fastest candidate of its evidence.
local prompt = io.read("a")

local kernels = {
  jik = [[
void matmul(int n, const float *a, const float *b, float *c) {
    for (int j = 0; j < n; j++)
        for (int i = 0; i < n; i++) {
            float acc = 0;
            for (int k = 0; k < n; k++) acc += a[i * n + k] * b[k * n + j];
            c[i * n + j] = acc;
        }
}
]],
  jki = [[
void matmul(int n, const float *a, const float *b, float *c) {
    for (int x = 0; x < n * n; x++) c[x] = 0;
    for (int j = 0; j < n; j++)
        for (int k = 0; k < n; k++) {
            const float bkj = b[k * n + j];
            for (int i = 0; i < n; i++) c[i * n + j] += a[i * n + k] * bkj;
        }
}
]],
  kji = [[
void matmul(int n, const float *a, const float *b, float *c) {
    for (int x = 0; x < n * n; x++) c[x] = 0;
    for (int k = 0; k < n; k++)
        for (int j = 0; j < n; j++) {
            const float bkj = b[k * n + j];
            for (int i = 0; i < n; i++) c[i * n + j] += a[i * n + k] * bkj;
        }
}
]],
  ikj = [[
void matmul(int n, const float *a, const float *b, float *c) {
    for (int i = 0; i < n; i++) {
        float *restrict ci = c + i * n;
        for (int j = 0; j < n; j++) ci[j] = 0;
        for (int k = 0; k < n; k++) {
            const float aik = a[i * n + k];
            const float *restrict bk = b + k * n;
            for (int j = 0; j < n; j++) ci[j] += aik * bk[j];
        }
    }
}
]],
}
local order = { "jik", "jki", "kji", "ikj" }

if prompt:find("You keep kwb's lessons ledger.", 1, true) then
  -- evidence lines: "- 1a2b3c4d accepted 4.10x (n=128 4.10x): order ikj"
  local best, best_score
  for id, score, name in prompt:gmatch("\n%- (%x+) %a+ ([%d.]+)x[^\n]-: order (%a+)") do
    if not best_score or tonumber(score) > best_score then best, best_score = { id = id, name = name }, tonumber(score) end
  end
  if best then
    io.write(string.format("```lessons\n- [loop-order] Loop order %s was the fastest of the orders tried: propose it "
                           .. "first (ids: %s)\n```\n", best.name, best.id))
  else
    io.write("```lessons\n- none\n```\n")
  end
  return
end

local lessons = prompt:match("\nLessons from earlier evaluations[^\n]*\n(.-)\n\n") or prompt:match("\nLessons from earlier evaluations[^\n]*\n(.*)$") or ""
local first = lessons:match("Loop order (%a+) was the fastest")
if first and kernels[first] then
  for i, name in ipairs(order) do
    if name == first then table.remove(order, i) end
  end
  table.insert(order, 1, first)
end

local path = assert(os.getenv("KWB_TEST_LESSONS_STATE"), "KWB_TEST_LESSONS_STATE names the state file")
local done = {}
local f = io.open(path, "r")
if f then
  for line in f:lines() do done[line] = true end
  f:close()
end
for _, name in ipairs(order) do
  if not done[name] then
    f = assert(io.open(path, "a"))
    f:write(name, "\n")
    f:close()
    io.write(string.format("order %s\n\n```c\n%s```\n", name, kernels[name]))
    return
  end
end
io.write("Every order I know was proposed.\n")
