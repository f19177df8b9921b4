// The CUDA backend (runtime/cuda_backend.h, docs/executor.md): chooses how
// the executed ranks map onto GPUs and processes, then runs each rank with
// run_rank_on_gpu (runtime/cuda_rank.h).
// - One executed rank (a replay, or a one-rank program): in this process, on
//   $LACUNA_CUDA_DEVICE (default 0).
// - Under mpirun: this process runs executed rank #OMPI_COMM_WORLD_RANK on
//   GPU OMPI_COMM_WORLD_LOCAL_RANK; world rank 0 returns every rank's spans,
//   the others their own.
// - Otherwise the built-in launcher: one forked child per executed rank,
//   child i on GPU i; more ranks than GPUs is an error that suggests replay.
// Every host-side check (plan, enqueue order, communicator matching) runs
// before any process or GPU work starts.
#ifdef LACUNA_HAVE_CUDA
#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <memory>
#include <optional>
#include <string>
#include <tuple>

#include "kernels/nccl_loader.h"
#include "runtime/backend.h"
#include "runtime/cuda_backend.h"
#include "runtime/cuda_launch.h"
#include "runtime/cuda_nccl.h"
#include "runtime/cuda_probe.h"
#include "runtime/cuda_rank.h"
#include "runtime/enqueue_order.h"
#include "runtime/memory_bound.h"
#include "runtime/plan.h"
#include "sim/core/error.h"

namespace lacuna::runtime {
namespace {

using namespace std::chrono_literals;

int device_from_env() {
  const char* v = std::getenv("LACUNA_CUDA_DEVICE");
  if (v == nullptr || *v == '\0') return 0;
  try {
    std::size_t used = 0;
    const int d = std::stoi(v, &used);
    if (used == std::string(v).size() && d >= 0) return d;
  } catch (const std::exception&) {
  }
  throw Error("LACUNA_CUDA_DEVICE='" + std::string(v) + "' is not a GPU index");
}

ExecutionResult merge(const Plan& plan, const std::vector<RankOutcome>& outcomes, const ExecuteOptions& options) {
  ExecutionResult result;
  for (const RankOutcome& o : outcomes) {
    if (!o.error.empty()) throw Error("execute (cuda) failed on rank " + std::to_string(o.rank) + ": " + o.error);
  }
  for (const RankOutcome& o : outcomes) {
    result.spans.insert(result.spans.end(), o.spans.begin(), o.spans.end());
    result.ranks.push_back(o.rank);
    result.emulated_ops += o.emulated_ops;
    // The ranks' clocks start together (the world all-reduce): an iteration
    // lasts until its last rank ends.
    if (result.iteration_ns.size() < o.iteration_ns.size()) result.iteration_ns.resize(o.iteration_ns.size(), 0);
    for (std::size_t i = 0; i < o.iteration_ns.size(); ++i) {
      result.iteration_ns[i] = std::max(result.iteration_ns[i], o.iteration_ns[i]);
    }
  }
  std::sort(result.ranks.begin(), result.ranks.end());
  std::sort(result.spans.begin(), result.spans.end(), [](const ExecutedSpan& a, const ExecutedSpan& b) {
    return std::tie(a.iteration, a.rank, a.stream, a.op) < std::tie(b.iteration, b.rank, b.stream, b.op);
  });
  for (const ExecutedSpan& s : result.spans) {
    if (s.iteration == options.iterations - 1) result.end_ns = std::max(result.end_ns, s.end_ns);
  }
  // Bytes NCCL moved for the ranks reported (program.proto's S per
  // collective and per send), all iterations.
  for (const StreamPlan& sp : plan.streams) {
    if (!std::binary_search(result.ranks.begin(), result.ranks.end(), sp.rank)) continue;
    for (const PlannedOp& p : sp.ops) {
      if (p.emulated || p.fixed_ns > 0) continue;
      if (p.kind == OpKind::kCollective || p.kind == OpKind::kSend) result.bytes_moved += p.bytes * options.iterations;
    }
  }
  return result;
}

// One rank in this process (no fork): replay, or a one-rank program.
RankOutcome run_here(const Plan& plan, const std::vector<CommSpec>& specs, int rank, int device,
                     const ExecuteOptions& options) {
  if (specs.empty()) return run_rank_on_gpu(plan, rank, device, options, nullptr);
  const kernels::nccl::Library lib = kernels::nccl::Library::load();
  const std::string ids = make_unique_ids(lib, specs.size());
  NcclComms comms(lib, specs, ids, rank, device);
  return run_rank_on_gpu(plan, rank, device, options, &comms);
}

class CudaBackend final : public Backend {
 public:
  std::string_view name() const override { return "cuda"; }

  std::string device_description() const override {
    // In a child: this process may still have to fork its rank processes,
    // which a CUDA context would not survive.
    try {
      const int device = device_from_env();
      return "CUDA: " + run_in_child([device] { return describe_cuda_device(device); }, 60s) +
             "; bf16 CUDA kernels and cuBLAS, NCCL";
    } catch (const Error& e) {
      return std::string("CUDA: unavailable: ") + e.what();
    }
  }

  bool primary_process() const override {
    const std::optional<MpiEnv> mpi = detect_mpi([](const char* name) { return std::getenv(name); });
    return !mpi || mpi->world_rank == 0;
  }

  ExecutionResult execute(const ir::Program& program, const ExecuteOptions& options) override {
    if (options.iterations < 1) {
      throw Error("execute: iterations must be >= 1, got " + std::to_string(options.iterations));
    }
    if (options.timeout.count() <= 0) throw Error("execute: timeout must be > 0");
    const Plan plan = make_plan(program, PlanOptions{.ranks = options.ranks,
                                                     .apply_compute_time_scale = options.apply_compute_time_scale,
                                                     .replay = options.replay});
    // Host-side checks for every rank, before any GPU work: the recorded
    // spans' host memory, then each rank's enqueue order. Each rank's device
    // memory is checked on its GPU before its first allocation.
    const std::int64_t kept = options.keep_all_iterations ? options.iterations : 1;
    MemoryEstimate host;
    host.spans = estimate_span_memory(plan, kept);
    check_memory(host, Bytes(options.max_memory_bytes), "--max-host-memory-gb");
    for (int r : plan.ranks) {
      std::vector<const StreamPlan*> streams;
      for (const StreamPlan& sp : plan.streams) {
        if (sp.rank == r) streams.push_back(&sp);
      }
      enqueue_order(streams, plan.num_events[static_cast<std::size_t>(r)]);
    }
    const std::vector<CommSpec> specs = comm_specs(plan);
    const auto setup_timeout = std::max<std::chrono::milliseconds>(options.timeout, 60s);

    const std::optional<MpiEnv> mpi = detect_mpi([](const char* name) { return std::getenv(name); });
    if (plan.ranks.size() == 1 && (!mpi || mpi->world_size == 1)) {
      const int device = mpi ? mpi->local_rank : device_from_env();
      return merge(plan, {run_here(plan, specs, plan.ranks[0], device, options)}, options);
    }
    if (mpi) return run_mpi(plan, specs, *mpi, options, setup_timeout);
    return run_forked(plan, specs, options, setup_timeout);
  }

 private:
  static ExecutionResult run_mpi(const Plan& plan, const std::vector<CommSpec>& specs, const MpiEnv& mpi,
                                 const ExecuteOptions& options, std::chrono::milliseconds setup_timeout) {
    if (mpi.world_size != static_cast<int>(plan.ranks.size())) {
      throw Error(SourceLocation{}, "execute (cuda) under mpirun: " + std::to_string(mpi.world_size) +
                  " processes for " + std::to_string(plan.ranks.size()) + " executed ranks",
                  "start one process per executed rank (mpirun -np " + std::to_string(plan.ranks.size()) +
                  "), or replay one rank (--replay --ranks R)");
    }
    const int rank = plan.ranks[static_cast<std::size_t>(mpi.world_rank)];
    const char* dir_env = std::getenv("LACUNA_RENDEZVOUS_DIR");
    const std::string dir = rendezvous_dir(mpi, dir_env != nullptr ? dir_env : "");
    const kernels::nccl::Library lib = kernels::nccl::Library::load();
    const std::string ids =
        exchange_ids_via_files(mpi, dir, [&] { return make_unique_ids(lib, specs.size()); }, setup_timeout);
    RankOutcome mine;
    try {
      NcclComms comms(lib, specs, ids, rank, mpi.local_rank);
      mine = run_rank_on_gpu(plan, rank, mpi.local_rank, options, &comms);
    } catch (const std::exception& e) {
      mine = RankOutcome{};
      mine.rank = rank;
      mine.error = e.what();
    }
    // Publish even a failure, so that world rank 0 reports it.
    std::vector<RankOutcome> all = gather_outcomes_via_files(mpi, dir, mine, setup_timeout);
    return merge(plan, all, options);
  }

  static ExecutionResult run_forked(const Plan& plan, const std::vector<CommSpec>& specs,
                                    const ExecuteOptions& options, std::chrono::milliseconds setup_timeout) {
    const int n = static_cast<int>(plan.ranks.size());
    const std::string count_text = run_in_child(
        [] {
          std::string why;
          const int count = local_gpu_count(why);
          if (count == 0) throw Error("no GPU: " + why);
          return std::to_string(count);
        },
        setup_timeout);
    const int gpus = std::stoi(count_text);
    if (n > gpus) {
      throw Error(SourceLocation{}, "execute (cuda): " + std::to_string(n) + " executed ranks need " +
                  std::to_string(n) + " GPUs (one process per GPU) but this machine has " + std::to_string(gpus),
                  "replay one rank on one GPU and emulate its peers: --replay --ranks R (or run under mpirun on "
                  "more GPUs)");
    }
    const std::vector<RankOutcome> outcomes = run_children(
        n,
        [&] {
          const kernels::nccl::Library lib = kernels::nccl::Library::load();
          return make_unique_ids(lib, specs.size());
        },
        [&](int i, const std::string& ids) {
          const int rank = plan.ranks[static_cast<std::size_t>(i)];
          const kernels::nccl::Library lib = kernels::nccl::Library::load();
          NcclComms comms(lib, specs, ids, rank, i);
          return run_rank_on_gpu(plan, rank, i, options, &comms);
        },
        setup_timeout);
    return merge(plan, outcomes, options);
  }
};

}  // namespace

std::unique_ptr<Backend> make_cuda_backend() { return std::make_unique<CudaBackend>(); }

}  // namespace lacuna::runtime
#endif
