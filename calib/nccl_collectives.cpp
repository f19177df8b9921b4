#include "calib/nccl_collectives.h"

#include <algorithm>
#include <string>

#include <fmt/format.h>

#include "calib/bench_driver.h"
#include "kernels/nccl_loader.h"
#include "sim/calibration/fit.h"
#include "sim/core/error.h"

#ifdef LACUNA_HAVE_CUDA
#include <cuda_runtime.h>
#endif

namespace lacuna::calibrate {

namespace nccl = kernels::nccl;

std::vector<int64_t> collective_sizes(int64_t min_bytes, int64_t max_bytes) {
  std::vector<int64_t> out;
  for (int64_t s = std::max<int64_t>(min_bytes, 1); s <= max_bytes; s *= 4) {
    out.push_back(s);
    if (s > INT64_MAX / 4) break;
  }
  return out;
}

std::vector<int> collective_group_sizes(int n) {
  std::vector<int> out;
  for (int g = 2; g < n; g *= 2) out.push_back(g);
  if (n >= 2) out.push_back(n);
  return out;
}

#ifndef LACUNA_HAVE_CUDA

bool collectives_built() { return false; }

CollectiveBenchResult run_collective_benchmarks(const CollectiveBenchOptions&) {
  throw Error(SourceLocation{}, "collective benchmarks: not built with CUDA",
              "rebuild on a machine with nvcc (cmake -DLACUNA_CUDA=ON), or pass --no-collectives");
}

#else

bool collectives_built() { return true; }

namespace {

void cuda_check(cudaError_t e, const char* what) {
  if (e != cudaSuccess) throw Error(fmt::format("CUDA {} failed: {}", what, cudaGetErrorString(e)));
}

struct Member {
  int device = 0;
  cudaStream_t stream = nullptr;
  cudaEvent_t start = nullptr, stop = nullptr;
  void* send = nullptr;
  void* recv = nullptr;
};

// One communicator over devices 0..g-1 with its streams, events and buffers.
class Group {
 public:
  Group(const nccl::Library& lib, int g, int64_t buffer_bytes) : lib_(lib), members_(static_cast<size_t>(g)) {
    std::vector<int> devs(static_cast<size_t>(g));
    for (int i = 0; i < g; ++i) devs[static_cast<size_t>(i)] = i;
    comms_.resize(static_cast<size_t>(g));
    lib_.check(lib_.api().CommInitAll(comms_.data(), g, devs.data()), "ncclCommInitAll");
    for (int i = 0; i < g; ++i) {
      Member& m = members_[static_cast<size_t>(i)];
      m.device = i;
      cuda_check(cudaSetDevice(i), "cudaSetDevice");
      cuda_check(cudaStreamCreateWithFlags(&m.stream, cudaStreamNonBlocking), "cudaStreamCreate");
      cuda_check(cudaEventCreate(&m.start), "cudaEventCreate");
      cuda_check(cudaEventCreate(&m.stop), "cudaEventCreate");
      cuda_check(cudaMalloc(&m.send, static_cast<size_t>(buffer_bytes)), "cudaMalloc (send buffer)");
      cuda_check(cudaMalloc(&m.recv, static_cast<size_t>(buffer_bytes)), "cudaMalloc (receive buffer)");
      // Non-zero bf16 inputs (bytes 0x3F: 0x3F3F ≈ 0.746): the reduction does real work.
      cuda_check(cudaMemset(m.send, 0x3F, static_cast<size_t>(buffer_bytes)), "cudaMemset");
    }
    for (auto& m : members_) {
      cuda_check(cudaSetDevice(m.device), "cudaSetDevice");
      cuda_check(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
    }
  }
  ~Group() {
    for (auto& m : members_) {
      cudaSetDevice(m.device);
      cudaStreamSynchronize(m.stream);
      cudaFree(m.send);
      cudaFree(m.recv);
      cudaEventDestroy(m.start);
      cudaEventDestroy(m.stop);
      cudaStreamDestroy(m.stream);
    }
    for (nccl::Comm c : comms_)
      if (c) lib_.api().CommDestroy(c);
  }
  Group(const Group&) = delete;
  Group& operator=(const Group&) = delete;

  int size() const { return static_cast<int>(members_.size()); }

  // One timed launch of `kind` (p2p: 0 → 1 send/receive) of S bytes; returns
  // the slowest member's time in ns.
  double run(ir::CollectiveKind kind, bool p2p, int64_t bytes) {
    const auto& a = lib_.api();
    const int g = size();
    const size_t elems = static_cast<size_t>(bytes / 2);  // bf16
    const size_t per_rank = elems / static_cast<size_t>(g);
    for (auto& m : members_) {
      cuda_check(cudaSetDevice(m.device), "cudaSetDevice");
      cuda_check(cudaEventRecord(m.start, m.stream), "cudaEventRecord");
    }
    lib_.check(a.GroupStart(), "ncclGroupStart");
    for (int r = 0; r < g; ++r) {
      Member& m = members_[static_cast<size_t>(r)];
      const nccl::Comm c = comms_[static_cast<size_t>(r)];
      const nccl::Stream s = static_cast<void*>(m.stream);
      if (p2p) {
        if (r == 0) lib_.check(a.Send(m.send, elems, nccl::kBfloat16, 1, c, s), "ncclSend");
        if (r == 1) lib_.check(a.Recv(m.recv, elems, nccl::kBfloat16, 0, c, s), "ncclRecv");
        continue;
      }
      switch (kind) {
        case ir::ALL_REDUCE:
          lib_.check(a.AllReduce(m.send, m.recv, elems, nccl::kBfloat16, nccl::kSum, c, s), "ncclAllReduce");
          break;
        case ir::ALL_GATHER:  // S is the gathered output
          lib_.check(a.AllGather(m.send, m.recv, per_rank, nccl::kBfloat16, c, s), "ncclAllGather");
          break;
        case ir::REDUCE_SCATTER:  // S is the unreduced input
          lib_.check(a.ReduceScatter(m.send, m.recv, per_rank, nccl::kBfloat16, nccl::kSum, c, s),
                     "ncclReduceScatter");
          break;
        case ir::ALL_TO_ALL:  // S is the send buffer, S / g to each peer
          if (a.AlltoAll != nullptr) {
            lib_.check(a.AlltoAll(m.send, m.recv, per_rank, nccl::kBfloat16, c, s), "ncclAlltoAll");
          } else {
            for (int peer = 0; peer < g; ++peer) {
              const size_t off = static_cast<size_t>(peer) * per_rank * 2;
              lib_.check(a.Send(static_cast<char*>(m.send) + off, per_rank, nccl::kBfloat16, peer, c, s), "ncclSend");
              lib_.check(a.Recv(static_cast<char*>(m.recv) + off, per_rank, nccl::kBfloat16, peer, c, s), "ncclRecv");
            }
          }
          break;
        default:
          throw Error("collective benchmarks: unsupported kind " + ir::CollectiveKind_Name(kind));
      }
    }
    lib_.check(a.GroupEnd(), "ncclGroupEnd");
    double worst = 0;
    for (int r = 0; r < g; ++r) {
      if (p2p && r > 1) continue;
      Member& m = members_[static_cast<size_t>(r)];
      cuda_check(cudaSetDevice(m.device), "cudaSetDevice");
      cuda_check(cudaEventRecord(m.stop, m.stream), "cudaEventRecord");
    }
    for (int r = 0; r < g; ++r) {
      if (p2p && r > 1) continue;
      Member& m = members_[static_cast<size_t>(r)];
      cuda_check(cudaSetDevice(m.device), "cudaSetDevice");
      cuda_check(cudaEventSynchronize(m.stop), "cudaEventSynchronize");
      cuda_check(cudaGetLastError(), "collective launch");
      float ms = 0;
      cuda_check(cudaEventElapsedTime(&ms, m.start, m.stop), "cudaEventElapsedTime");
      worst = std::max(worst, static_cast<double>(ms) * 1e6);
    }
    return worst;
  }

 private:
  const nccl::Library& lib_;
  std::vector<nccl::Comm> comms_;
  std::vector<Member> members_;
};

}  // namespace

CollectiveBenchResult run_collective_benchmarks(const CollectiveBenchOptions& o) {
  CollectiveBenchResult out;
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess || n <= 0) {
    cudaGetLastError();
    throw Error(SourceLocation{}, "collective benchmarks: no usable GPU", "calibrate with --cpu, or pass --no-collectives");
  }
  out.device_count = n;
  const nccl::Library lib = nccl::Library::load();
  out.nccl_version = lib.version();
  if (n < 2) return out;

  // Two buffers of the largest size per GPU, within 80 % of the free memory.
  size_t free_min = SIZE_MAX;
  for (int d = 0; d < n; ++d) {
    cuda_check(cudaSetDevice(d), "cudaSetDevice");
    size_t free_b = 0, total_b = 0;
    cuda_check(cudaMemGetInfo(&free_b, &total_b), "cudaMemGetInfo");
    free_min = std::min(free_min, free_b);
  }
  int64_t max_bytes = o.max_bytes;
  while (max_bytes > o.min_bytes && 2 * max_bytes > static_cast<int64_t>(0.8 * static_cast<double>(free_min)))
    max_bytes /= 4;
  const std::vector<int64_t> sizes = collective_sizes(o.min_bytes, max_bytes);
  const int64_t buffer = sizes.empty() ? o.min_bytes : sizes.back();

  struct Spec {
    ir::CollectiveKind kind;
    bool p2p;
  };
  for (int g : collective_group_sizes(n)) {
    Group group(lib, g, buffer);
    std::vector<Spec> specs = {{ir::ALL_REDUCE, false}, {ir::ALL_GATHER, false}, {ir::REDUCE_SCATTER, false},
                               {ir::ALL_TO_ALL, false}};
    if (g == 2) specs.push_back({ir::COLLECTIVE_UNSPECIFIED, true});  // GPU 0 → GPU 1
    for (const Spec& sp : specs) {
      std::vector<calib::CollectivePoint> points;
      for (int64_t s : sizes) {
        // Whole elements per rank: S a multiple of 2 bytes × g.
        const int64_t unit = 2 * static_cast<int64_t>(g);
        const int64_t bytes = std::max(unit, s / unit * unit);
        for (int w = 0; w < o.warmup; ++w) group.run(sp.kind, sp.p2p, bytes);
        std::vector<double> t;
        for (int r = 0; r < o.repetitions; ++r) t.push_back(group.run(sp.kind, sp.p2p, bytes));
        calib::CollectivePoint p;
        p.set_bytes(bytes);
        p.set_time_ns(std::max<int64_t>(1, static_cast<int64_t>(median(t) + 0.5)));
        points.push_back(p);
      }
      const int32_t group_size = sp.p2p ? 2 : g;
      calib::CollectiveFit fit = calibration::fit_collective(sp.kind, sp.p2p, group_size, calib::NVLINK, points);
      if (o.log) {
        fmt::print(o.log, "  {:<15} {} GPUs: {} sizes, latency {:.1f} us, bus bandwidth {:.1f} GB/s\n",
                   sp.p2p ? "send/receive" : ir::CollectiveKind_Name(sp.kind), group_size, points.size(),
                   fit.latency_ns() / 1e3, fit.bus_bandwidth_bytes_per_s() / 1e9);
      }
      out.fits.push_back(std::move(fit));
    }
  }
  return out;
}

#endif

}  // namespace lacuna::calibrate
