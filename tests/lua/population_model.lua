-- tests/lua/population_model.lua: a deterministic stand-in for a model, the
-- `command` provider's program in tests/recipes/population_host.lua (run as
-- `./kwb tests/lua/population_model.lua ARM`, the prompt on stdin, the reply
-- on stdout). Each prompt is kept as $KWB_TEST_POP_DIR/prompt-N.txt (N from
-- 1, counted over every arm) with its arm in arm-N.txt.
--
-- Arm "kernels" proposes, request by request: the j-k-i loop order (far
-- slower than the start kernel's i-j-k), i-k-j (far faster), k-j-i (far
-- slower), i-k-j again (a repeat: the same kernel), i-k-j with a comment
-- and renamed locals (a duplicate: the same built code); then nothing.
-- (Orders whose times are near the start kernel's are left out: which of
-- two kernels is a cell's elite must not depend on the machine's load.)
-- Arm "idle" never has a kernel.
local arm = arg[1] or "kernels"
local prompt = io.read("a")
local dir = assert(os.getenv("KWB_TEST_POP_DIR"), "KWB_TEST_POP_DIR names the prompts' directory")

local n = 1
while io.open(string.format("%s/prompt-%d.txt", dir, n), "r") do n = n + 1 end
local f = assert(io.open(string.format("%s/prompt-%d.txt", dir, n), "w"))
f:write(prompt)
f:close()
f = assert(io.open(string.format("%s/arm-%d.txt", dir, n), "w"))
f:write(arm)
f:close()

if arm == "idle" then
  io.write("I have no kernel to offer.\n")
  return
end

local kernels = {
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
  ikj = [[
void matmul(int n, const float *a, const float *b, float *c) {
    for (int i = 0; i < n; i++) {
        for (int j = 0; j < n; j++) c[i * n + j] = 0;
        for (int k = 0; k < n; k++) for (int j = 0; j < n; j++) c[i * n + j] += a[i * n + k] * b[k * n + j];
    }
}
]],
  ikj_renamed = [[
/* the ikj order again: b's rows are read in order */
void matmul(int n, const float *a, const float *b, float *c) {
    for (int row = 0; row < n; row++) {

        for (int col = 0; col < n; col++) c[row * n + col] = 0;
        for (int x = 0; x < n; x++) for (int col = 0; col < n; col++) c[row * n + col] += a[row * n + x] * b[x * n + col];
    }   // each row of c once
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
}
local order = { "jki", "ikj", "kji", "ikj", "ikj_renamed" }

-- (this arm's requests so far: its own count, whatever the other arm asked)
local mine = 0
for i = 1, n do
  local a = io.open(string.format("%s/arm-%d.txt", dir, i), "r")
  if a and a:read("a") == arm then mine = mine + 1 end
  if a then a:close() end
end
local name = order[mine]
if not name then
  io.write("Every kernel I know was proposed.\n")
  return
end
io.write(string.format("order %s\n\n```c\n%s```\n", name, kernels[name]))
