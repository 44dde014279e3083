-- tests/lua/nvfp4_pack_check.lua: the fragment-major layout of gen.cu's
-- nvfp4_pack, restated in Lua from its definition (modeldocs/nvfp4.md), for
-- the CPU test (tests/lua/test_nvfp4_gpu.lua) and the GPU test
-- (tests/gpu/nvfp4.lua).
--
--   local misplaced = require "nvfp4_pack_check"
--   local bad_q, bad_sf = misplaced(q, sf, pq, psf, rows_total, cols)   -- strings of bytes
--
-- Returns the 16-byte code pieces and the 4-byte scale words of the packed
-- copy that are not where the layout puts them (0, 0 when it is right).
return function(q, sf, pq, psf, rows, cols)
  assert(#pq == #q and #psf == #sf, "packed sizes differ from the linear ones")
  local bad_q, bad_s = 0, 0
  for m = 0, rows // 16 - 1 do
    for c = 0, cols // 128 - 1 do
      for h = 0, 1 do
        for l = 0, 31 do
          local g, j = l >> 2, l & 3
          local src = (16 * m + 8 * h + g) * cols // 2 + 64 * c + 16 * j
          local at = 8 * cols * m + 1024 * c + 512 * h + 16 * l
          if pq:sub(at + 1, at + 16) ~= q:sub(src + 1, src + 16) then bad_q = bad_q + 1 end
          if h == 0 then
            local s0 = (16 * m + g) * cols // 16 + 8 * c + 2 * j
            local s1 = s0 + 8 * cols // 16
            local sat = cols * m + 128 * c + 4 * l
            if psf:sub(sat + 1, sat + 4) ~= sf:sub(s0 + 1, s0 + 2) .. sf:sub(s1 + 1, s1 + 2) then bad_s = bad_s + 1 end
          end
        end
      end
    end
  end
  return bad_q, bad_s
end
