#include "sim/run/run_estimate.h"

#include <unistd.h>

#include <algorithm>
#include <cstdio>

#include <fmt/format.h>

#include "sim/core/error.h"
#include "sim/core/parallel_map.h"
#include "sim/report/observers/bubble_accounting.h"
#include "sim/report/observers/comm_accounting.h"
#include "sim/report/formats/format.h"

namespace lacuna::run {

RunEstimate estimate_run(const ir::Program& program, const engine::SimulationOptions& base, const SamplingPlan& sampling,
                         NetworkMode network) {
  RunEstimate e;
  e.engine = engine::estimate_engine(program, base);
  // As run_monte_carlo runs them: K samples on the pool when the program
  // draws anything, otherwise the observed run alone.
  const bool random = sampling.samples > 1 && run_is_random(program, base);
  const int32_t runs = random ? sampling.samples : 1;
  e.concurrent_runs = random ? std::min(runs, static_cast<int32_t>(resolve_jobs(sampling.jobs))) : 1;
  e.events = e.engine.events * static_cast<uint64_t>(runs);
  e.host_events = e.engine.host_events * static_cast<uint64_t>(runs);
  e.engine_state = Bytes(e.engine.state.count() * e.concurrent_runs);
  // bare_sample_runner copies the program for each sample it runs.
  if (e.concurrent_runs > 1) {
    e.sample_programs = Bytes(static_cast<int64_t>(program.SpaceUsedLong()) * (e.concurrent_runs - 1));
  }
  e.accounting = report::BubbleAccounting::estimate_bytes(e.engine.all_ranks, e.engine.simulated_ranks,
                                                          e.engine.represented_ranks) +
                 report::CommAccounting::estimate_bytes(program, e.engine.simulated_ranks);
  if (network == NetworkMode::kFlow) {
    e.network = Bytes((kFlowBytesPerClusterGpu * e.engine.all_ranks + kFlowBytesPerSimulatedRank * e.engine.simulated_ranks) *
                      e.concurrent_runs);
  }
  return e;
}

std::string describe_estimate(const RunEstimate& e) {
  std::string host;
  if (e.host_events > 0) {
    host = fmt::format(" (up to {} with late hosts)",
                       report::format_si(static_cast<double>(e.events + e.host_events), "events"));
  }
  return fmt::format("{}{}, {:.1f} MB beyond the program", report::format_si(static_cast<double>(e.events), "events"),
                     host, static_cast<double>(e.total().count()) * 1e-6);
}

Bytes resident_bytes() {
  std::FILE* f = std::fopen("/proc/self/statm", "r");
  if (f == nullptr) return Bytes::zero();
  long size = 0, resident = 0;
  const int n = std::fscanf(f, "%ld %ld", &size, &resident);
  std::fclose(f);
  const long page = ::sysconf(_SC_PAGE_SIZE);
  if (n != 2 || page <= 0 || resident < 0) return Bytes::zero();
  return Bytes(static_cast<int64_t>(resident) * page);
}

Bytes default_memory_limit() {
  const long pages = ::sysconf(_SC_PHYS_PAGES);
  const long page = ::sysconf(_SC_PAGE_SIZE);
  if (pages <= 0 || page <= 0) return Bytes::zero();
  // 80 %: the rest for the OS, the page cache and what the estimate leaves
  // out (the flow network's per-sample copies, allocator slack).
  return Bytes(static_cast<int64_t>(0.8 * static_cast<double>(pages) * static_cast<double>(page)));
}

Bytes memory_limit_from_gb(double gb) {
  if (gb < 0) return default_memory_limit();
  return Bytes(static_cast<int64_t>(gb * 1e9));
}

void check_run_memory(const RunEstimate& e, Bytes resident, Bytes limit, const std::string& option) {
  if (limit <= Bytes::zero() || Bytes(resident + e.total()) <= limit) return;
  std::string runs;
  if (e.concurrent_runs > 1) runs = fmt::format(" over {} concurrent samples", e.concurrent_runs);
  throw Error(SourceLocation{{}, 0, 0, option},
              fmt::format("the run would need about {:.2f} GB: {:.2f} GB held now (program, cost model) "
                          "and {:.2f} GB to come (engine state {:.2f} GB for {} of {} ranks{}, accounting {:.2f} GB, "
                          "flow network {:.2f} GB, sample programs {:.2f} GB), above the limit of {:.2f} GB",
                          Bytes(resident + e.total()).gb(), resident.gb(), e.total().gb(), e.engine_state.gb(),
                          e.engine.simulated_ranks, e.engine.all_ranks, runs, e.accounting.gb(), e.network.gb(),
                          e.sample_programs.gb(), limit.gb()),
              "simulate one representative per class (‹fold›), fewer concurrent samples (‹j›), or raise " + option);
}

}  // namespace lacuna::run
