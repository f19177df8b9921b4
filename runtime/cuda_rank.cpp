// See cuda_rank.h. Everything here is host code; the kernels it launches
// are kernels/ (compute) and runtime/cuda_spin.cu (time).
#ifdef LACUNA_HAVE_CUDA
#include "runtime/cuda_rank.h"

#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "kernels/nccl_loader.h"
#include "kernels/gpu_case.h"
#include "kernels/gpu_kernels.h"
#include "runtime/cuda_nccl.h"
#include "runtime/cuda_spin.h"
#include "runtime/enqueue_order.h"
#include "runtime/gpu_memory.h"
#include "sim/core/error.h"

namespace lacuna::runtime {
namespace {

namespace gpu = kernels::gpu;
namespace nccl = kernels::nccl;
using Clock = std::chrono::steady_clock;

void check(cudaError_t e, const std::string& what) {
  if (e != cudaSuccess) throw Error("CUDA: " + what + ": " + cudaGetErrorString(e));
}

void check_launch(int code, const std::string& what) {
  if (code != 0) throw Error("CUDA: launching " + what + ": " + cuda::error_string(code));
}

bool is_comm(const PlannedOp& p) {
  return p.kind == OpKind::kCollective || p.kind == OpKind::kSend || p.kind == OpKind::kRecv;
}

// Every device object of the run. Members are destroyed in reverse order:
// buffers and cases before the contexts they were made on.
struct Resources {
  std::vector<std::unique_ptr<gpu::Context>> contexts;  // per stream
  std::vector<std::vector<std::unique_ptr<kernels::GpuEnqueueCase>>> cases;
  std::vector<gpu::DeviceBuffer> buf_a, buf_b;  // per stream, bf16
  gpu::DeviceBuffer barrier;                    // stream 0: the world all-reduce
  std::vector<std::vector<cudaEvent_t>> begin, end;  // per stream, per op (timed)
  std::vector<std::vector<cudaEvent_t>> instances;   // per IR event, per record (untimed)
  cudaEvent_t start = nullptr;
  std::uint64_t* slots = nullptr;  // device: [0] t0, [1 + s] stream s's stretch stamp
  int* abort_host = nullptr;       // host-mapped: the spin kernels' abort flag
  int* abort_dev = nullptr;

  ~Resources() {
    // Best effort: a destructor must not throw; errors here mean the device is gone.
    for (auto* v : {&begin, &end, &instances}) {
      for (auto& evs : *v) {
        for (cudaEvent_t e : evs) {
          if (e != nullptr) cudaEventDestroy(e);
        }
      }
    }
    if (start != nullptr) cudaEventDestroy(start);
    if (slots != nullptr) cudaFree(slots);
    if (abort_host != nullptr) cudaFreeHost(abort_host);
  }
};

class RankRun {
 public:
  RankRun(const Plan& plan, int rank, int device, const ExecuteOptions& options, NcclComms* comms)
      : plan_(plan), rank_(rank), device_(device), options_(options), comms_(comms) {
    for (const StreamPlan& sp : plan.streams) {
      if (sp.rank == rank) streams_.push_back(&sp);
    }
    if (streams_.empty()) throw Error("execute (cuda): rank " + std::to_string(rank) + " has no streams to run");
    // Host-only checks first: a broken program fails before any GPU work.
    order_ = enqueue_order(streams_, plan.num_events[static_cast<std::size_t>(rank)]);
    for (const StreamPlan* sp : streams_) {
      for (const PlannedOp& p : sp->ops) {
        if (p.emulated) ++emulated_;
        if (is_comm(p) && !p.emulated && comms_ == nullptr) {
          throw InternalError("execute (cuda): internal: " + p.label + " needs NCCL but no communicators were made");
        }
      }
    }
  }

  RankOutcome run() {
    RankOutcome out;
    out.rank = rank_;
    out.emulated_ops = emulated_;
    setup();
    for (int it = 0; it < options_.iterations; ++it) {
      enqueue_iteration();
      wait_iteration();
      check(cudaDeviceSynchronize(), "cudaDeviceSynchronize after iteration " + std::to_string(it));
      collect(it, options_.keep_all_iterations || it == options_.iterations - 1, out);
    }
    std::sort(out.spans.begin(), out.spans.end(), [](const ExecutedSpan& a, const ExecutedSpan& b) {
      return std::tie(a.iteration, a.rank, a.stream, a.op) < std::tie(b.iteration, b.rank, b.stream, b.op);
    });
    return out;
  }

  // After a failure: stop the spinning kernels and NCCL, wait a little for
  // the streams to drain. When they do not, the device objects are leaked on
  // purpose: freeing them would block on the hung work, and the error must
  // reach the caller.
  std::string abort_and_drain() {
    if (res_ && res_->abort_host != nullptr) *static_cast<volatile int*>(res_->abort_host) = 1;
    if (comms_ != nullptr) comms_->abort_all();
    if (!res_) return {};
    const auto deadline = Clock::now() + std::chrono::seconds(5);
    for (;;) {
      bool drained = true;
      for (const auto& ctx : res_->contexts) {
        if (cudaStreamQuery(static_cast<cudaStream_t>(ctx->stream())) == cudaErrorNotReady) drained = false;
      }
      if (drained) return {};
      if (Clock::now() > deadline) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    (void)res_.release();  // deliberate leak, see above
    return "\n(the GPU work could not be drained within 5 s after the abort: its memory was not freed; end this "
           "process)";
  }

 private:
  cudaStream_t stream(std::size_t s) const { return static_cast<cudaStream_t>(res_->contexts[s]->stream()); }

  std::string where(std::size_t s, int op) const {
    const StreamPlan& sp = *streams_[s];
    std::string w = stream_label(sp.rank, sp.stream, sp.name);
    if (op >= 0) w += " op " + std::to_string(op) + " (" + sp.ops[static_cast<std::size_t>(op)].what + ")";
    return w;
  }

  // The whole rank's device memory against what the GPU has free now (its
  // CUDA context and the NCCL communicators already made), before the first
  // allocation (runtime/gpu_memory.h).
  void check_device_memory() const {
    check(cudaSetDevice(device_), "cudaSetDevice");
    std::size_t free_bytes = 0, total_bytes = 0;
    check(cudaMemGetInfo(&free_bytes, &total_bytes), "cudaMemGetInfo");
    cudaDeviceProp prop{};
    check(cudaGetDeviceProperties(&prop, device_), "cudaGetDeviceProperties");
    check_gpu_memory(estimate_gpu_memory(plan_, rank_), Bytes(static_cast<std::int64_t>(free_bytes)), rank_,
                     "GPU " + std::to_string(device_) + " (" + prop.name + ")");
  }

  void setup() {
    check_device_memory();
    res_ = std::make_unique<Resources>();
    Resources& r = *res_;
    const std::size_t n = streams_.size();
    kernels::GpuCaseOptions copt;
    copt.seed = options_.seed;
    copt.max_sets = 1;
    r.cases.resize(n);
    r.begin.resize(n);
    r.end.resize(n);
    for (std::size_t s = 0; s < n; ++s) {
      const StreamPlan& sp = *streams_[s];
      try {
        r.contexts.push_back(std::make_unique<gpu::Context>(device_));
        gpu::Context& ctx = *r.contexts.back();
        for (const ir::Compute& c : sp.computes) r.cases[s].push_back(kernels::make_gpu_enqueue_case(c, ctx, copt));
        const NcclBufferElements e = nccl_buffer_elements(sp);
        r.buf_a.emplace_back(ctx, gpu::DType::kBf16, static_cast<int64_t>(e.a));
        r.buf_a.back().zero();
        r.buf_b.emplace_back(ctx, gpu::DType::kBf16, static_cast<int64_t>(e.b));
        r.buf_b.back().zero();
        r.begin[s].assign(sp.ops.size(), nullptr);
        r.end[s].assign(sp.ops.size(), nullptr);
        for (std::size_t i = 0; i < sp.ops.size(); ++i) {
          check(cudaEventCreate(&r.begin[s][i]), "cudaEventCreate");
          check(cudaEventCreate(&r.end[s][i]), "cudaEventCreate");
        }
      } catch (const std::exception& e) {
        throw Error(where(s, -1) + " during setup: " + e.what());
      }
    }
    r.barrier = gpu::DeviceBuffer(*r.contexts[0], gpu::DType::kBf16, 1);
    r.barrier.zero();
    r.instances.resize(order_.records_per_event.size());
    for (std::size_t e = 0; e < order_.records_per_event.size(); ++e) {
      r.instances[e].assign(static_cast<std::size_t>(order_.records_per_event[e]), nullptr);
      for (cudaEvent_t& ev : r.instances[e]) check(cudaEventCreateWithFlags(&ev, cudaEventDisableTiming), "cudaEventCreate");
    }
    check(cudaEventCreate(&r.start), "cudaEventCreate");
    void* slots = nullptr;
    check(cudaMalloc(&slots, sizeof(std::uint64_t) * (n + 1)), "cudaMalloc (timer slots)");
    r.slots = static_cast<std::uint64_t*>(slots);
    check(cudaMemset(r.slots, 0, sizeof(std::uint64_t) * (n + 1)), "cudaMemset");
    void* flag = nullptr;
    check(cudaHostAlloc(&flag, sizeof(int), cudaHostAllocMapped), "cudaHostAlloc (abort flag)");
    r.abort_host = static_cast<int*>(flag);
    *static_cast<volatile int*>(r.abort_host) = 0;
    void* flag_dev = nullptr;
    check(cudaHostGetDevicePointer(&flag_dev, flag, 0), "cudaHostGetDevicePointer (abort flag)");
    r.abort_dev = static_cast<int*>(flag_dev);
    // Setup faults (fills, the cases' prepare kernels) surface here.
    check(cudaDeviceSynchronize(), "cudaDeviceSynchronize after setup");
  }

  void enqueue_iteration() {
    Resources& r = *res_;
    if (comms_ != nullptr && plan_.ranks.size() > 1) {
      // Align the ranks' t0: every rank leaves this all-reduce together.
      const auto& world = comms_->get(CommKey{});
      comms_->lib().check(comms_->lib().api().AllReduce(r.barrier.data(), r.barrier.data(), 1, nccl::kBfloat16,
                                                        nccl::kSum, world.comm, stream(0)),
                          "ncclAllReduce (iteration barrier)");
    }
    check_launch(cuda::launch_stamp(stream(0), &r.slots[0]), "the t0 stamp kernel");
    check(cudaEventRecord(r.start, stream(0)), "cudaEventRecord (iteration start)");
    for (std::size_t s = 1; s < streams_.size(); ++s) {
      check(cudaStreamWaitEvent(stream(s), r.start, 0), "cudaStreamWaitEvent (iteration start)");
    }
    for (const EnqueueStep& step : order_.steps) {
      const auto s = static_cast<std::size_t>(step.stream);
      const PlannedOp& p = streams_[s]->ops[static_cast<std::size_t>(step.op)];
      try {
        check(cudaEventRecord(r.begin[s][static_cast<std::size_t>(step.op)], stream(s)), "cudaEventRecord");
        enqueue_op(s, p, step);
        check(cudaEventRecord(r.end[s][static_cast<std::size_t>(step.op)], stream(s)), "cudaEventRecord");
      } catch (const std::exception& e) {
        throw Error(where(s, step.op) + ": " + e.what());
      }
    }
  }

  void enqueue_op(std::size_t s, const PlannedOp& p, const EnqueueStep& step) {
    Resources& r = *res_;
    const cudaStream_t st = stream(s);
    switch (p.kind) {
      case OpKind::kCompute:
        if (p.case_index < 0) {
          check_launch(cuda::launch_spin(st, nullptr, 0, p.fixed_ns, r.abort_dev), "a fixed-duration spin");
        } else {
          const bool stretch = p.scale > 1.0;
          if (stretch) check_launch(cuda::launch_stamp(st, &r.slots[1 + s]), "a stamp kernel");
          r.cases[s][static_cast<std::size_t>(p.case_index)]->enqueue();
          if (stretch) {
            check_launch(cuda::launch_stretch(st, &r.slots[1 + s], p.scale - 1.0, r.abort_dev),
                         "a compute_time_scale stretch");
          }
        }
        return;
      case OpKind::kCollective:
      case OpKind::kSend:
      case OpKind::kRecv:
        if (p.emulated) {
          check_launch(cuda::launch_spin(st, &r.slots[0], p.predicted.start_ns,
                                         p.predicted.end_ns - p.predicted.start_ns, r.abort_dev),
                       "an emulated communication spin");
        } else {
          enqueue_comm(s, p);
        }
        return;
      case OpKind::kRecord:
        check(cudaEventRecord(r.instances[static_cast<std::size_t>(p.event)][static_cast<std::size_t>(step.instance - 1)], st),
              "cudaEventRecord (event " + std::to_string(p.event) + ")");
        return;
      case OpKind::kWait:
        if (step.instance > 0) {
          check(cudaStreamWaitEvent(
                    st, r.instances[static_cast<std::size_t>(p.event)][static_cast<std::size_t>(step.instance - 1)], 0),
                "cudaStreamWaitEvent (event " + std::to_string(p.event) + ")");
        }
        return;
    }
  }

  void enqueue_comm(std::size_t s, const PlannedOp& p) {
    Resources& r = *res_;
    const cudaStream_t st = stream(s);
    const NcclComms::Entry& c = comms_->get(comm_key_of(*streams_[s], p));
    const nccl::Library& lib = comms_->lib();
    const nccl::Api& api = lib.api();
    auto* a = static_cast<char*>(r.buf_a[s].data());
    auto* b = static_cast<char*>(r.buf_b[s].data());
    const int peer = 1 - c.nccl_rank;  // p2p communicators have two ranks
    if (p.fixed_ns > 0) {
      // Synchronise the members with one element, then take the fixed time.
      if (p.kind == OpKind::kCollective) {
        lib.check(api.AllReduce(a, a, 1, nccl::kBfloat16, nccl::kSum, c.comm, st), "ncclAllReduce (sync)");
      } else if (p.kind == OpKind::kSend) {
        lib.check(api.Send(a, 1, nccl::kBfloat16, peer, c.comm, st), "ncclSend (sync)");
      } else {
        lib.check(api.Recv(a, 1, nccl::kBfloat16, peer, c.comm, st), "ncclRecv (sync)");
      }
      check_launch(cuda::launch_spin(st, nullptr, 0, p.fixed_ns, r.abort_dev), "a fixed-duration spin");
      return;
    }
    const std::size_t n = nccl_bf16_elements(p);
    if (p.kind == OpKind::kSend) {
      lib.check(api.Send(a, n, nccl::kBfloat16, peer, c.comm, st), "ncclSend");
      return;
    }
    if (p.kind == OpKind::kRecv) {
      lib.check(api.Recv(a, n, nccl::kBfloat16, peer, c.comm, st), "ncclRecv");
      return;
    }
    const std::size_t per = n / static_cast<std::size_t>(std::max(c.size, 1));
    const std::size_t mine = per * static_cast<std::size_t>(c.nccl_rank) * 2;  // bytes
    switch (p.collective) {
      case CollectiveKind::kAllReduce:
        lib.check(api.AllReduce(a, a, n, nccl::kBfloat16, nccl::kSum, c.comm, st), "ncclAllReduce");
        return;
      case CollectiveKind::kAllGather:  // in place: my block sits at my offset
        lib.check(api.AllGather(a + mine, a, per, nccl::kBfloat16, c.comm, st), "ncclAllGather");
        return;
      case CollectiveKind::kReduceScatter:  // in place: the result lands at my offset
        lib.check(api.ReduceScatter(a, a + mine, per, nccl::kBfloat16, nccl::kSum, c.comm, st), "ncclReduceScatter");
        return;
      case CollectiveKind::kAllToAll:
        if (api.AlltoAll != nullptr) {
          lib.check(api.AlltoAll(a, b, per, nccl::kBfloat16, c.comm, st), "ncclAlltoAll");
        } else {
          lib.check(api.GroupStart(), "ncclGroupStart");
          for (int j = 0; j < c.size; ++j) {
            const std::size_t off = per * static_cast<std::size_t>(j) * 2;
            lib.check(api.Send(a + off, per, nccl::kBfloat16, j, c.comm, st), "ncclSend (all-to-all)");
            lib.check(api.Recv(b + off, per, nccl::kBfloat16, j, c.comm, st), "ncclRecv (all-to-all)");
          }
          lib.check(api.GroupEnd(), "ncclGroupEnd");
        }
        return;
      case CollectiveKind::kBroadcast:  // root: the group's first rank = NCCL rank 0
        lib.require(api.Broadcast != nullptr, "ncclBroadcast");
        lib.check(api.Broadcast(a, a, n, nccl::kBfloat16, 0, c.comm, st), "ncclBroadcast");
        return;
      case CollectiveKind::kReduce:
        lib.require(api.Reduce != nullptr, "ncclReduce");
        lib.check(api.Reduce(a, b, n, nccl::kBfloat16, nccl::kSum, 0, c.comm, st), "ncclReduce");
        return;
    }
  }

  // Polls the end events until every op finished; fails on a fault, an NCCL
  // error, or no progress for options.timeout.
  void wait_iteration() {
    Resources& r = *res_;
    std::vector<std::size_t> done(streams_.size(), 0);
    auto last_progress = Clock::now();
    for (;;) {
      bool all = true, moved = false;
      for (std::size_t s = 0; s < streams_.size(); ++s) {
        while (done[s] < r.end[s].size()) {
          const cudaError_t q = cudaEventQuery(r.end[s][done[s]]);
          if (q == cudaErrorNotReady) break;
          if (q != cudaSuccess) {
            throw Error("CUDA: " + where(s, static_cast<int>(done[s])) + " failed on the device: " +
                        cudaGetErrorString(q) + report(done));
          }
          ++done[s];
          moved = true;
        }
        all = all && done[s] == r.end[s].size();
      }
      if (all) return;
      if (comms_ != nullptr) {
        if (const std::string err = comms_->async_error(); !err.empty()) {
          throw Error("execute (cuda) on rank " + std::to_string(rank_) + ": " + err + report(done));
        }
      }
      const auto now = Clock::now();
      if (moved) {
        last_progress = now;
      } else if (now - last_progress > options_.timeout) {
        throw Error("execute (cuda) timed out: no operation of rank " + std::to_string(rank_) + " finished for " +
                    std::to_string(options_.timeout.count()) +
                    " ms (a deadlock, a send without a receive or a mismatched collective)" + report(done));
      }
      std::this_thread::sleep_for(std::chrono::microseconds(100));
    }
  }

  std::string report(const std::vector<std::size_t>& done) const {
    std::ostringstream out;
    out << "\nwhat every stream was doing:";
    for (std::size_t s = 0; s < streams_.size(); ++s) {
      const StreamPlan& sp = *streams_[s];
      out << "\n  " << stream_label(sp.rank, sp.stream, sp.name) << ": ";
      if (done[s] >= sp.ops.size()) {
        out << "done";
        continue;
      }
      out << "not finished, at op " << done[s] << " (" << sp.ops[done[s]].what << ")";
    }
    return out.str();
  }

  std::int64_t ns(cudaEvent_t from, cudaEvent_t to) const {
    float ms = 0.0f;
    check(cudaEventElapsedTime(&ms, from, to), "cudaEventElapsedTime");
    return std::llround(static_cast<double>(ms) * 1e6);
  }

  void collect(int it, bool keep, RankOutcome& out) {
    Resources& r = *res_;
    std::int64_t last = 0;
    for (std::size_t s = 0; s < streams_.size(); ++s) {
      const StreamPlan& sp = *streams_[s];
      std::int64_t prev_end = 0;
      for (std::size_t i = 0; i < sp.ops.size(); ++i) {
        const PlannedOp& p = sp.ops[i];
        ExecutedSpan span;
        span.iteration = it;
        span.rank = sp.rank;
        span.stream = sp.stream;
        span.op = static_cast<int>(i);
        // Event timestamps are ~0.5 us apart at best: keep ready <= start <= end.
        span.ready_ns = prev_end;
        span.start_ns = std::max(span.ready_ns, ns(r.start, r.begin[s][i]));
        span.end_ns = std::max(span.start_ns, ns(r.start, r.end[s][i]));
        if (p.emulated) span.start_ns = std::clamp(p.predicted.start_ns, span.start_ns, span.end_ns);
        prev_end = span.end_ns;
        if (keep) out.spans.push_back(span);
      }
      last = std::max(last, prev_end);
    }
    out.iteration_ns.push_back(last);
  }

  const Plan& plan_;
  const int rank_;
  const int device_;
  const ExecuteOptions& options_;
  NcclComms* comms_;
  std::vector<const StreamPlan*> streams_;
  EnqueueOrder order_;
  int emulated_ = 0;
  std::unique_ptr<Resources> res_;
};

}  // namespace

RankOutcome run_rank_on_gpu(const Plan& plan, int rank, int device, const ExecuteOptions& options,
                            NcclComms* comms) {
  RankRun run(plan, rank, device, options, comms);
  try {
    return run.run();
  } catch (const Error& e) {
    const std::string tail = run.abort_and_drain();
    throw Error(std::string(e.what()) + tail);
  } catch (const std::exception& e) {
    const std::string tail = run.abort_and_drain();
    throw Error("execute (cuda) on rank " + std::to_string(rank) + ": " + e.what() + tail);
  }
}

}  // namespace lacuna::runtime
#endif
