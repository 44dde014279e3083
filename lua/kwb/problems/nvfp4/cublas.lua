-- kwb/problems/nvfp4/cublas.lua: the nvfp4_moe problem's baseline "cublas" (a plan
-- baseline, kwb.measure.baseline): the same routed-experts layer in bf16 through
-- cuBLAS, as a user with no NVFP4 kernel would run it on Hopper.
--
-- Weights: bf16 copies of the bench's NVFP4 weights, dequantised on the
-- device (kernels/nvfp4_moe/cublas_base.cu: e2m1(code) * e4m3(scale), exact
-- in bf16), each expert's s2 the alpha of its gemms, so the function is the
-- reference's (ref.cu) within fp32 rounding. They take 2 * E * 3 * I * H
-- bytes (22.5 GB for DeepSeek-V3's 256 experts): made when the baseline is
-- measured and freed right after (close), since the device is shared with
-- compute-sanitizer's runs later; a device without the room says so, and the
-- run goes on without the baseline.
--
-- Routing: the bench's ids are read back to the host once per shape and the
-- per-expert token lists, offsets and each slot's row are computed there,
-- outside the timed region (the plan is built for these inputs, drawn once),
-- then the plan: gather x rows into expert order; per active expert one
-- cublasGemmEx for up ([n_e, H] x [H, 2I], bf16 in, fp32 compute and out);
-- silu(gate) * up to bf16; per active expert one cublasGemmEx for down
-- ([n_e, I] x [I, H], fp32 out); the weighted sum over each token's k slots to
-- bf16. Every step is on the plan's stream, captured in its CUDA graph.
local M = {}

M.source = "kernels/nvfp4_moe/cublas_base.cu"

local function gib(bytes) return string.format("%.1f GB", bytes / 1e9) end

local Maker = {}
Maker.__index = Maker

-- open(h) -> maker, or nil, why: the kernels built; weights made on first use.
function M.open(h)
  local cuda = require "kwb.cuda"
  local files = require "kwb.base.files"
  local mod, msg = cuda.compile { file = files.resolve(M.source), arch = h.recipe.arch }
  if not mod then return nil, "its kernels do not compile: " .. tostring(msg) end
  local k = {}
  for _, name in ipairs { "nvfp4_bl_dequant", "nvfp4_bl_gather", "nvfp4_bl_silu_mul", "nvfp4_bl_combine" } do
    local kern, kmsg = mod:kernel(name)
    if not kern then return nil, string.format("no kernel %s: %s", name, tostring(kmsg)) end
    k[name] = kern
  end
  local d = assert(cuda.device(0))
  return setmetatable({ cuda = cuda, k = k, sms = d.sms, weights = nil }, Maker)
end

-- One NVFP4 matrix set of the bench as a bf16 buffer [E, rows, cols] and
-- its s2 per expert on the host; nil, why where the device has no room.
function Maker:dequant(q, sf, s2buf, n)
  local cuda = self.cuda
  local w, msg, info = cuda.buffer("bf16", n)
  if not w then
    return nil, string.format("its bf16 weights need %s more on the device (%s%s)", gib(2 * n), tostring(msg),
                              info and info.code and (", " .. info.code) or "")
  end
  local p = assert(cuda.plan { { self.k.nvfp4_bl_dequant, grid = self.sms * 8, block = 256, args = { q, sf, w, n } } })
  local ok, err = p:run()
  if not ok then w:free(); return nil, "dequantising its weights failed: " .. tostring(err) end
  return w, assert(cuda.to_host(s2buf)):totable()
end

-- The bf16 weights of shape s, made once for its E, H and I (the last set
-- freed first: one set at a time).
function Maker:weights_for(b)
  local s = b.shape
  local key = string.format("E=%d,H=%d,I=%d", s.E, s.H, s.I)
  if self.weights and self.weights.key == key then return self.weights end
  self:close()
  local bufs = b.bufs
  local w13, s13 = self:dequant(bufs.w13q, bufs.w13sf, bufs.w13s2, s.E * 2 * s.I * s.H)
  if not w13 then return nil, s13 end
  local w2, s2 = self:dequant(bufs.w2q, bufs.w2sf, bufs.w2s2, s.E * s.H * s.I)
  if not w2 then w13:free(); return nil, s2 end
  self.weights = { key = key, w13 = w13, s13 = s13, w2 = w2, s2 = s2 }
  return self.weights
end

-- The routing of the bench, on the host: each expert's slots t*K + k in
-- order (rows off[e] .. off[e] + count[e] - 1 of the expert-ordered
-- activations), the token of each row (order) and the row of each slot.
function M.route(ids, T, E, K)
  local TK = T * K
  local count, off = {}, {}
  for e = 0, E - 1 do count[e] = 0 end
  for tj = 1, TK do
    local e = ids[tj]
    if math.type(e) ~= "integer" or e < 0 or e >= E then
      return nil, string.format("slot %d routes to expert %s, outside 0..%d", tj - 1, tostring(e), E - 1)
    end
    count[e] = count[e] + 1
  end
  local at = 0
  for e = 0, E - 1 do off[e] = at; at = at + count[e] end
  local order, slot, fill = {}, {}, {}
  for e = 0, E - 1 do fill[e] = off[e] end
  for tj = 1, TK do
    local e = ids[tj]
    local row = fill[e]
    fill[e] = row + 1
    order[row + 1] = (tj - 1) // K   -- the token of the row
    slot[tj] = row
  end
  return { count = count, off = off, order = order, slot = slot }
end

local function device_i32(cuda, list)
  local h = require("kwb.host").buffer("i32", #list)
  h:set(list)
  return assert(cuda.from_host(h))
end

-- plan(b) -> the plan of bench b for the inputs in it now, or nil, why.
function Maker:plan(b)
  local cuda, k = self.cuda, self.k
  local s = b.shape
  local T, H, I, E, K = s.T, s.H, s.I, s.E, s.K
  local TK = T * K
  local w, why = self:weights_for(b)
  if not w then return nil, why end
  -- (outside the timed region: the routing read back and sorted on the host)
  local rt, rwhy = M.route(assert(cuda.to_host(b.bufs.ids)):totable(), T, E, K)
  if not rt then return nil, rwhy end
  local order, slot = device_i32(cuda, rt.order), device_i32(cuda, rt.slot)
  local scratch = {}
  for name, spec in pairs { xs = { "bf16", TK * H }, hs = { "f32", TK * 2 * I }, a = { "bf16", TK * I },
                            y = { "f32", TK * H } } do
    local buf, msg = cuda.buffer(spec[1], spec[2])
    if not buf then return nil, string.format("no room for its scratch %s (%s)", name, tostring(msg)) end
    scratch[name] = buf
  end
  local p = assert(cuda.plan())
  local function add(step)
    local ok, msg = p:add(step)
    if not ok then error(msg, 0) end
  end
  local okp, perr = pcall(function()
    add { k.nvfp4_bl_gather, grid = { (H + 255) // 256, TK }, block = 256, args = { b.bufs.x, order, scratch.xs, TK, H } }
    for e = 0, E - 1 do
      local n = rt.count[e]
      if n > 0 then   -- hs[rows of e] = s2 * xs[rows of e] . W13[e]^T: row-major [n, H] x [2I, H]^T
        add { gemm = { trans_a = true, m = 2 * I, n = n, k = H, alpha = w.s13[e + 1],
                       a = w.w13, a_offset = e * 2 * I * H, lda = H, b = scratch.xs, b_offset = rt.off[e] * H, ldb = H,
                       c = scratch.hs, c_offset = rt.off[e] * 2 * I, ldc = 2 * I } }
      end
    end
    add { k.nvfp4_bl_silu_mul, grid = { (I + 255) // 256, TK }, block = 256, args = { scratch.hs, scratch.a, TK, I } }
    for e = 0, E - 1 do
      local n = rt.count[e]
      if n > 0 then   -- y[rows of e] = s2 * a[rows of e] . W2[e]^T: row-major [n, I] x [H, I]^T
        add { gemm = { trans_a = true, m = H, n = n, k = I, alpha = w.s2[e + 1],
                       a = w.w2, a_offset = e * H * I, lda = I, b = scratch.a, b_offset = rt.off[e] * I, ldb = I,
                       c = scratch.y, c_offset = rt.off[e] * H, ldc = H } }
      end
    end
    add { k.nvfp4_bl_combine, grid = { (H + 255) // 256, T }, block = 256,
          args = { scratch.y, slot, b.bufs.tw, b.bufs.out, T, H, K } }
  end)
  if not okp then return nil, tostring(perr) end
  return p
end

-- close(): the bf16 weights freed (now, not at the next collection).
function Maker:close()
  if self.weights then
    self.weights.w13:free()
    self.weights.w2:free()
    self.weights = nil
  end
end

return M
