// Flash attention, forward and backward, following ref_attention.h's
// FlashAttention-2 blueprint (online softmax forward; backward recomputing P
// from the LSE with D = rowsum(dO∘O) precomputed). bf16 storage, fp32 math on
// CUDA cores (no tensor cores: correctness first).
//
// Thread mapping (128 threads = 4 warps per block; the head dim is held as
// kSlots·32 columns, zero-padded, column c of a row owned by lane c % 32):
//   forward   block = kRows query rows of one (batch, head); each warp owns
//             kRows/4 rows. K/V tiles of 32 keys are staged in shared memory;
//             scores: lane ↔ key (a dot product per lane, warp-reduced max and
//             sum); P·V: lane ↔ columns, p broadcast by shuffles.
//   backward  three kernels, no atomics (deterministic):
//             1. D_i = Σ dO_i·O_i, one warp per query row;
//             2. dQ: like the forward (block of query rows, loop over K/V
//                tiles), dQ_i = scale·Σ_j dS_ij·K_j;
//             3. dK, dV: block = kRows keys of one (batch, kv head), loop over
//                the group's query heads and 32-row Q/dO tiles (lane ↔ query
//                row), dV_j = Σ_i P_ij·dO_i, dK_j = scale·Σ_i dS_ij·Q_i.
//             Splitting dQ from dK/dV recomputes QKᵀ and dO·Vᵀ once more
//             (7 matmuls instead of FA2's 5) in exchange for no atomics.
// Shared-memory rows that lanes index by row (key / query tiles) are padded
// by one 32-bit word so that the 32 lanes hit 32 different banks.
#include "kernels/gpu_device_util.h"
#include "kernels/gpu_launch.h"

namespace lacuna::kernels::gpu {
namespace {

using dev::bf16;
using dev::kFullMask;
using dev::to_bf;
using dev::to_f;
using Dims = launch::AttentionDims;

constexpr int kWarps = 4;
constexpr int kThreads = kWarps * 32;
constexpr int kTile = 32;  // keys per K/V tile (forward, dQ) and query rows per tile (dK/dV): one per lane

// kRows (rows per block) for a head-dim capacity: 16, or 8 at 256 columns to
// stay under the 48 KiB of static shared memory.
template <int kSlots>
__host__ __device__ constexpr int rows_per_block() {
  return kSlots >= 8 ? 8 : 16;
}

// A tile of `kR` rows of kSlots·32 bf16 columns, stored as bf16 pairs with
// kPairs + 1 pairs per row (the padding word).
template <int kSlots>
struct TileGeom {
  static constexpr int kCols = 32 * kSlots;
  static constexpr int kPairs = kCols / 2;
  static constexpr int kStride = kPairs + 1;  // odd: lane-per-row reads are conflict-free
};

template <int kSlots>
__device__ __forceinline__ const bf16* row_elems(const __nv_bfloat162* tile, int row) {
  return reinterpret_cast<const bf16*>(tile + row * TileGeom<kSlots>::kStride);
}

// Copies rows [first, first + rows) of a [.., seq, nh, d] tensor at head
// `head` into a padded shared tile; rows past `seq` and columns past d are
// zero, so dot products over the padded width are exact.
template <int kSlots>
__device__ void load_tile(__nv_bfloat162* tile, int rows, const bf16* base, int64_t batch_index, int64_t first,
                          int64_t seq, int64_t nh, int64_t head, int64_t d) {
  constexpr int kCols = TileGeom<kSlots>::kCols;
  for (int e = threadIdx.x; e < rows * kCols; e += blockDim.x) {
    const int r = e / kCols, c = e % kCols;
    const int64_t i = first + r;
    bf16 val = to_bf(0.0f);
    if (i < seq && c < d) val = base[((batch_index * seq + i) * nh + head) * d + c];
    reinterpret_cast<bf16*>(tile + r * TileGeom<kSlots>::kStride)[c] = val;
  }
}

// Σ_c a[c]·b[c] over the padded width, two columns per step.
template <int kSlots>
__device__ __forceinline__ float dot_pairs(const __nv_bfloat162* a, const __nv_bfloat162* b) {
  float s = 0.0f;
#pragma unroll 8
  for (int p = 0; p < TileGeom<kSlots>::kPairs; ++p) {
    const float2 x = __bfloat1622float2(a[p]);
    const float2 y = __bfloat1622float2(b[p]);
    s = fmaf(x.x, y.x, s);
    s = fmaf(x.y, y.y, s);
  }
  return s;
}

__device__ __forceinline__ bool visible(const Dims& d, int64_t i, int64_t j, int64_t offset) {
  return i < d.seq_q && j < d.seq_kv && (!d.causal || j <= i + offset);
}

// ---------------------------------------------------------------- forward

template <int kSlots>
__global__ void __launch_bounds__(kThreads)
    attention_forward_kernel(Dims d, const bf16* __restrict__ q, const bf16* __restrict__ k,
                             const bf16* __restrict__ v, bf16* __restrict__ o, float* __restrict__ lse) {
  using G = TileGeom<kSlots>;
  constexpr int kRows = rows_per_block<kSlots>();
  constexpr int kRowsPerWarp = kRows / kWarps;
  __shared__ __nv_bfloat162 q_s[kRows * G::kStride];
  __shared__ __nv_bfloat162 k_s[kTile * G::kStride];
  __shared__ __nv_bfloat162 v_s[kTile * G::kStride];

  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int64_t b = blockIdx.z, h = blockIdx.y, g = h / (d.heads / d.kv_heads);
  const int64_t i0 = static_cast<int64_t>(blockIdx.x) * kRows;
  const int64_t offset = d.seq_kv - d.seq_q;  // causal: row i sees keys j <= i + offset

  load_tile<kSlots>(q_s, kRows, q, b, i0, d.seq_q, d.heads, h, d.head_dim);

  float m[kRowsPerWarp], l[kRowsPerWarp], acc[kRowsPerWarp][kSlots];
#pragma unroll
  for (int r = 0; r < kRowsPerWarp; ++r) {
    m[r] = -INFINITY;
    l[r] = 0.0f;
#pragma unroll
    for (int s = 0; s < kSlots; ++s) acc[r][s] = 0.0f;
  }

  // Causal block skipping: no key past the last row's diagonal is loaded.
  const int64_t last_row = (i0 + kRows < d.seq_q ? i0 + kRows : d.seq_q) - 1;
  const int64_t kv_end = d.causal ? (last_row + offset + 1 < d.seq_kv ? last_row + offset + 1 : d.seq_kv) : d.seq_kv;

  for (int64_t j0 = 0; j0 < kv_end; j0 += kTile) {
    __syncthreads();  // the previous tile is consumed (and, first time, q_s is complete)
    load_tile<kSlots>(k_s, kTile, k, b, j0, d.seq_kv, d.kv_heads, g, d.head_dim);
    load_tile<kSlots>(v_s, kTile, v, b, j0, d.seq_kv, d.kv_heads, g, d.head_dim);
    __syncthreads();

    const int64_t j = j0 + lane;
    float p[kRowsPerWarp];
#pragma unroll
    for (int r = 0; r < kRowsPerWarp; ++r) {
      const int row = warp * kRowsPerWarp + r;
      const int64_t i = i0 + row;
      p[r] = 0.0f;
      const bool ok = visible(d, i, j, offset);
      const float score = ok ? d.scale * dot_pairs<kSlots>(q_s + row * G::kStride, k_s + lane * G::kStride)
                             : -INFINITY;
      const float m_new = fmaxf(m[r], dev::warp_max(score));
      if (m_new == -INFINITY) continue;  // warp-uniform: nothing visible yet in this row
      const float alpha = expf(m[r] - m_new);  // 0 on the first visible tile (m = -inf)
      p[r] = ok ? expf(score - m_new) : 0.0f;
      l[r] = alpha * l[r] + dev::warp_sum(p[r]);
#pragma unroll
      for (int s = 0; s < kSlots; ++s) acc[r][s] *= alpha;
      m[r] = m_new;
    }
    // acc[r][c] += Σ_jj p[r][jj]·V[jj][c], p of key jj taken from lane jj.
    for (int jj = 0; jj < kTile; ++jj) {
      const bf16* vrow = row_elems<kSlots>(v_s, jj);
      float vv[kSlots];
#pragma unroll
      for (int s = 0; s < kSlots; ++s) vv[s] = to_f(vrow[lane + 32 * s]);
#pragma unroll
      for (int r = 0; r < kRowsPerWarp; ++r) {
        const float pj = __shfl_sync(kFullMask, p[r], jj);
#pragma unroll
        for (int s = 0; s < kSlots; ++s) acc[r][s] = fmaf(pj, vv[s], acc[r][s]);
      }
    }
  }

#pragma unroll
  for (int r = 0; r < kRowsPerWarp; ++r) {
    const int64_t i = i0 + warp * kRowsPerWarp + r;
    if (i >= d.seq_q) continue;
    const float inv = 1.0f / l[r];
    bf16* orow = o + ((b * d.seq_q + i) * d.heads + h) * d.head_dim;
#pragma unroll
    for (int s = 0; s < kSlots; ++s) {
      const int c = lane + 32 * s;
      if (c < d.head_dim) orow[c] = to_bf(acc[r][s] * inv);
    }
    if (lane == 0) lse[(b * d.heads + h) * d.seq_q + i] = m[r] + logf(l[r]);
  }
}

// ---------------------------------------------------------------- backward 1: D = rowsum(dO∘O)

// One warp per (b, i, h) row, rows in Q's memory order; D laid out like LSE.
__global__ void __launch_bounds__(kThreads)
    attention_dot_do_o_kernel(Dims d, const bf16* __restrict__ o, const bf16* __restrict__ dout,
                              float* __restrict__ dd) {
  const int64_t rows = d.batch * d.seq_q * d.heads;
  const int lane = threadIdx.x & 31;
  const int64_t first = (static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) >> 5;
  const int64_t stride = (static_cast<int64_t>(gridDim.x) * blockDim.x) >> 5;
  for (int64_t row = first; row < rows; row += stride) {  // warp-uniform bound
    const bf16* orow = o + row * d.head_dim;
    const bf16* drow = dout + row * d.head_dim;
    float s = 0.0f;
    for (int64_t c = lane; c < d.head_dim; c += 32) s += to_f(orow[c]) * to_f(drow[c]);
    s = dev::warp_sum(s);
    if (lane == 0) {
      const int64_t h = row % d.heads, bi = row / d.heads, i = bi % d.seq_q, b = bi / d.seq_q;
      dd[(b * d.heads + h) * d.seq_q + i] = s;
    }
  }
}

// ---------------------------------------------------------------- backward 2: dQ

template <int kSlots>
__global__ void __launch_bounds__(kThreads)
    attention_dq_kernel(Dims d, const bf16* __restrict__ q, const bf16* __restrict__ k, const bf16* __restrict__ v,
                        const float* __restrict__ lse, const float* __restrict__ dd, const bf16* __restrict__ dout,
                        bf16* __restrict__ dq) {
  using G = TileGeom<kSlots>;
  constexpr int kRows = rows_per_block<kSlots>();
  constexpr int kRowsPerWarp = kRows / kWarps;
  __shared__ __nv_bfloat162 q_s[kRows * G::kStride];
  __shared__ __nv_bfloat162 do_s[kRows * G::kStride];
  __shared__ __nv_bfloat162 k_s[kTile * G::kStride];
  __shared__ __nv_bfloat162 v_s[kTile * G::kStride];

  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int64_t b = blockIdx.z, h = blockIdx.y, g = h / (d.heads / d.kv_heads);
  const int64_t i0 = static_cast<int64_t>(blockIdx.x) * kRows;
  const int64_t offset = d.seq_kv - d.seq_q;

  load_tile<kSlots>(q_s, kRows, q, b, i0, d.seq_q, d.heads, h, d.head_dim);
  load_tile<kSlots>(do_s, kRows, dout, b, i0, d.seq_q, d.heads, h, d.head_dim);

  float row_lse[kRowsPerWarp], row_d[kRowsPerWarp], acc[kRowsPerWarp][kSlots];
#pragma unroll
  for (int r = 0; r < kRowsPerWarp; ++r) {
    const int64_t i = i0 + warp * kRowsPerWarp + r;
    const int64_t li = (b * d.heads + h) * d.seq_q + i;
    row_lse[r] = i < d.seq_q ? lse[li] : 0.0f;
    row_d[r] = i < d.seq_q ? dd[li] : 0.0f;
#pragma unroll
    for (int s = 0; s < kSlots; ++s) acc[r][s] = 0.0f;
  }

  const int64_t last_row = (i0 + kRows < d.seq_q ? i0 + kRows : d.seq_q) - 1;
  const int64_t kv_end = d.causal ? (last_row + offset + 1 < d.seq_kv ? last_row + offset + 1 : d.seq_kv) : d.seq_kv;

  for (int64_t j0 = 0; j0 < kv_end; j0 += kTile) {
    __syncthreads();
    load_tile<kSlots>(k_s, kTile, k, b, j0, d.seq_kv, d.kv_heads, g, d.head_dim);
    load_tile<kSlots>(v_s, kTile, v, b, j0, d.seq_kv, d.kv_heads, g, d.head_dim);
    __syncthreads();

    const int64_t j = j0 + lane;
    float ds[kRowsPerWarp];
#pragma unroll
    for (int r = 0; r < kRowsPerWarp; ++r) {
      const int row = warp * kRowsPerWarp + r;
      ds[r] = 0.0f;
      if (!visible(d, i0 + row, j, offset)) continue;  // per lane; no shuffles in this loop
      const float score = d.scale * dot_pairs<kSlots>(q_s + row * G::kStride, k_s + lane * G::kStride);
      const float p = expf(score - row_lse[r]);
      const float dp = dot_pairs<kSlots>(do_s + row * G::kStride, v_s + lane * G::kStride);
      ds[r] = p * (dp - row_d[r]);
    }
    // acc[r][c] += Σ_jj dS[r][jj]·K[jj][c].
    for (int jj = 0; jj < kTile; ++jj) {
      const bf16* krow = row_elems<kSlots>(k_s, jj);
      float kv[kSlots];
#pragma unroll
      for (int s = 0; s < kSlots; ++s) kv[s] = to_f(krow[lane + 32 * s]);
#pragma unroll
      for (int r = 0; r < kRowsPerWarp; ++r) {
        const float dsj = __shfl_sync(kFullMask, ds[r], jj);
#pragma unroll
        for (int s = 0; s < kSlots; ++s) acc[r][s] = fmaf(dsj, kv[s], acc[r][s]);
      }
    }
  }

#pragma unroll
  for (int r = 0; r < kRowsPerWarp; ++r) {
    const int64_t i = i0 + warp * kRowsPerWarp + r;
    if (i >= d.seq_q) continue;
    bf16* out = dq + ((b * d.seq_q + i) * d.heads + h) * d.head_dim;
#pragma unroll
    for (int s = 0; s < kSlots; ++s) {
      const int c = lane + 32 * s;
      if (c < d.head_dim) out[c] = to_bf(d.scale * acc[r][s]);
    }
  }
}

// ---------------------------------------------------------------- backward 3: dK, dV

template <int kSlots>
__global__ void __launch_bounds__(kThreads)
    attention_dkdv_kernel(Dims d, const bf16* __restrict__ q, const bf16* __restrict__ k,
                          const bf16* __restrict__ v, const float* __restrict__ lse, const float* __restrict__ dd,
                          const bf16* __restrict__ dout, bf16* __restrict__ dk, bf16* __restrict__ dv) {
  using G = TileGeom<kSlots>;
  constexpr int kKeys = rows_per_block<kSlots>();
  constexpr int kKeysPerWarp = kKeys / kWarps;
  __shared__ __nv_bfloat162 k_s[kKeys * G::kStride];
  __shared__ __nv_bfloat162 v_s[kKeys * G::kStride];
  __shared__ __nv_bfloat162 q_s[kTile * G::kStride];
  __shared__ __nv_bfloat162 do_s[kTile * G::kStride];

  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int64_t b = blockIdx.z, g = blockIdx.y, group = d.heads / d.kv_heads;
  const int64_t j0 = static_cast<int64_t>(blockIdx.x) * kKeys;
  const int64_t offset = d.seq_kv - d.seq_q;

  load_tile<kSlots>(k_s, kKeys, k, b, j0, d.seq_kv, d.kv_heads, g, d.head_dim);
  load_tile<kSlots>(v_s, kKeys, v, b, j0, d.seq_kv, d.kv_heads, g, d.head_dim);

  float dk_acc[kKeysPerWarp][kSlots], dv_acc[kKeysPerWarp][kSlots];
#pragma unroll
  for (int kk = 0; kk < kKeysPerWarp; ++kk)
#pragma unroll
    for (int s = 0; s < kSlots; ++s) dk_acc[kk][s] = dv_acc[kk][s] = 0.0f;

  // Causal block skipping: the first row that sees key j0 is j0 − offset.
  const int64_t i_start = d.causal ? (j0 - offset > 0 ? j0 - offset : 0) : 0;

  for (int64_t hh = 0; hh < group; ++hh) {  // GQA: the query heads sharing kv head g
    const int64_t h = g * group + hh;
    for (int64_t i0 = i_start; i0 < d.seq_q; i0 += kTile) {
      __syncthreads();  // previous Q/dO tile consumed (and, first time, k_s/v_s complete)
      load_tile<kSlots>(q_s, kTile, q, b, i0, d.seq_q, d.heads, h, d.head_dim);
      load_tile<kSlots>(do_s, kTile, dout, b, i0, d.seq_q, d.heads, h, d.head_dim);
      __syncthreads();

      const int64_t i = i0 + lane;  // this lane's query row
      const int64_t li = (b * d.heads + h) * d.seq_q + i;
      const float row_lse = i < d.seq_q ? lse[li] : 0.0f;
      const float row_d = i < d.seq_q ? dd[li] : 0.0f;
      float p[kKeysPerWarp], ds[kKeysPerWarp];
#pragma unroll
      for (int kk = 0; kk < kKeysPerWarp; ++kk) {
        const int key = warp * kKeysPerWarp + kk;
        p[kk] = 0.0f;
        ds[kk] = 0.0f;
        if (!visible(d, i, j0 + key, offset)) continue;  // per lane; no shuffles in this loop
        const float score = d.scale * dot_pairs<kSlots>(q_s + lane * G::kStride, k_s + key * G::kStride);
        p[kk] = expf(score - row_lse);
        const float dp = dot_pairs<kSlots>(do_s + lane * G::kStride, v_s + key * G::kStride);
        ds[kk] = p[kk] * (dp - row_d);
      }
      // dV[key][c] += Σ_ii P[ii][key]·dO[ii][c]; dK[key][c] += Σ_ii dS[ii][key]·Q[ii][c].
      for (int ii = 0; ii < kTile; ++ii) {
        const bf16* qrow = row_elems<kSlots>(q_s, ii);
        const bf16* dorow = row_elems<kSlots>(do_s, ii);
        float qe[kSlots], de[kSlots];
#pragma unroll
        for (int s = 0; s < kSlots; ++s) {
          qe[s] = to_f(qrow[lane + 32 * s]);
          de[s] = to_f(dorow[lane + 32 * s]);
        }
#pragma unroll
        for (int kk = 0; kk < kKeysPerWarp; ++kk) {
          const float pi = __shfl_sync(kFullMask, p[kk], ii);
          const float dsi = __shfl_sync(kFullMask, ds[kk], ii);
#pragma unroll
          for (int s = 0; s < kSlots; ++s) {
            dv_acc[kk][s] = fmaf(pi, de[s], dv_acc[kk][s]);
            dk_acc[kk][s] = fmaf(dsi, qe[s], dk_acc[kk][s]);
          }
        }
      }
    }
  }

#pragma unroll
  for (int kk = 0; kk < kKeysPerWarp; ++kk) {
    const int64_t j = j0 + warp * kKeysPerWarp + kk;
    if (j >= d.seq_kv) continue;
    const int64_t base = ((b * d.seq_kv + j) * d.kv_heads + g) * d.head_dim;
#pragma unroll
    for (int s = 0; s < kSlots; ++s) {
      const int c = lane + 32 * s;
      if (c < d.head_dim) {
        dk[base + c] = to_bf(d.scale * dk_acc[kk][s]);
        dv[base + c] = to_bf(dv_acc[kk][s]);
      }
    }
  }
}

// ---------------------------------------------------------------- dispatch on head_dim

unsigned blocks_of(int64_t n, int per_block) { return static_cast<unsigned>((n + per_block - 1) / per_block); }

template <int kSlots>
int forward_impl(cudaStream_t s, const Dims& d, const bf16* q, const bf16* k, const bf16* v, bf16* o, float* lse) {
  const dim3 grid(blocks_of(d.seq_q, rows_per_block<kSlots>()), static_cast<unsigned>(d.heads),
                  static_cast<unsigned>(d.batch));
  attention_forward_kernel<kSlots><<<grid, kThreads, 0, s>>>(d, q, k, v, o, lse);
  return dev::launch_status();
}

template <int kSlots>
int backward_impl(cudaStream_t s, const Dims& d, const bf16* q, const bf16* k, const bf16* v, const bf16* o,
                  const float* lse, const bf16* dout, bf16* dq, bf16* dk, bf16* dv, float* dd) {
  attention_dot_do_o_kernel<<<dev::grid_for(d.batch * d.seq_q * d.heads * 32, kThreads), kThreads, 0, s>>>(
      d, o, dout, dd);
  if (int e = dev::launch_status()) return e;
  const dim3 grid_q(blocks_of(d.seq_q, rows_per_block<kSlots>()), static_cast<unsigned>(d.heads),
                    static_cast<unsigned>(d.batch));
  attention_dq_kernel<kSlots><<<grid_q, kThreads, 0, s>>>(d, q, k, v, lse, dd, dout, dq);
  if (int e = dev::launch_status()) return e;
  const dim3 grid_kv(blocks_of(d.seq_kv, rows_per_block<kSlots>()), static_cast<unsigned>(d.kv_heads),
                     static_cast<unsigned>(d.batch));
  attention_dkdv_kernel<kSlots><<<grid_kv, kThreads, 0, s>>>(d, q, k, v, lse, dd, dout, dk, dv);
  return dev::launch_status();
}

// Smallest column capacity (32·kSlots) that holds head_dim; the host checked head_dim <= 256.
template <typename F>
int dispatch(int64_t head_dim, F&& f) {
  if (head_dim <= 32) return f.template operator()<1>();
  if (head_dim <= 64) return f.template operator()<2>();
  if (head_dim <= 128) return f.template operator()<4>();
  return f.template operator()<8>();
}

}  // namespace

namespace launch {

int attention_forward(void* stream, const AttentionDims& d, const void* q, const void* k, const void* v, void* o,
                      float* lse) {
  cudaStream_t s = dev::as_stream(stream);
  const auto* qb = static_cast<const bf16*>(q);
  const auto* kb = static_cast<const bf16*>(k);
  const auto* vb = static_cast<const bf16*>(v);
  auto* ob = static_cast<bf16*>(o);
  return dispatch(d.head_dim, [&]<int kSlots>() { return forward_impl<kSlots>(s, d, qb, kb, vb, ob, lse); });
}

int attention_backward(void* stream, const AttentionDims& d, const void* q, const void* k, const void* v,
                       const void* o, const float* lse, const void* dout, void* dq, void* dk, void* dv,
                       float* workspace) {
  cudaStream_t s = dev::as_stream(stream);
  return dispatch(d.head_dim, [&]<int kSlots>() {
    return backward_impl<kSlots>(s, d, static_cast<const bf16*>(q), static_cast<const bf16*>(k),
                                 static_cast<const bf16*>(v), static_cast<const bf16*>(o), lse,
                                 static_cast<const bf16*>(dout), static_cast<bf16*>(dq), static_cast<bf16*>(dk),
                                 static_cast<bf16*>(dv), workspace);
  });
}

}  // namespace launch
}  // namespace lacuna::kernels::gpu
