#include "sim/report/terminal_report.h"

#include <fmt/format.h>

#include "sim/report/format.h"
#include "sim/report/names.h"

namespace lacuna::report {

namespace {

constexpr int kLabel = 24;

void row(std::string& out, std::string_view label, const std::string& value) {
  out += fmt::format("  {:<{}} {}\n", label, kLabel, value);
}

std::string plan_text(const ir::ProgramInfo& i) {
  std::string s = fmt::format("TP {} · CP {} · PP {} · DP {}", i.tp(), i.cp(), i.pp(), i.dp());
  if (i.virtual_stages() > 1) s += fmt::format(" · v {}", i.virtual_stages());
  return s;
}

double frac(int64_t ns, TimeNs total) {
  return total.count() > 0 ? static_cast<double>(ns) / static_cast<double>(total.count()) : 0.0;
}

// fmt pads by code units; "µ" is two bytes but one column.
std::string pad_left(const std::string& s, size_t width) {
  size_t columns = 0;
  for (unsigned char c : s) columns += (c & 0xC0) != 0x80;
  return columns >= width ? s : std::string(width - columns, ' ') + s;
}

}  // namespace

std::string format_summary(const Summary& s, const RunStats& run) {
  const ir::ProgramInfo& i = s.info;
  const TimeNs t = s.iteration_time;
  std::string out;
  out += fmt::format("lacuna simulate: {}\n\n", s.scenario_name.empty() ? "(unnamed)" : s.scenario_name);
  row(out, "GPUs", fmt::format("{}", s.num_gpus));
  row(out, "plan", plan_text(i));
  row(out, "schedule",
      fmt::format("{}, {} microbatches (global batch {}, micro batch {}, seq {})", schedule_name(i.schedule()),
                  i.num_microbatches(), i.global_batch(), i.micro_batch(), i.seq_length()));
  row(out, "recompute", fmt::format("{}{}", recompute_name(i.recompute()),
                                    i.sequence_parallel() ? ", sequence parallel" : ""));
  out += "\n";
  row(out, "iteration time", format_duration(t));
  row(out, "throughput", format_si(s.tokens_per_s, "tokens/s"));
  row(out, "model TFLOP/s per GPU", fmt::format("{:.1f} TFLOP/s (peak {:.1f})", s.tflops_per_gpu,
                                                i.peak_flops_per_gpu() / 1e12));
  row(out, "MFU", format_percent(s.mfu));
  row(out, "HFU", format_percent(s.hfu));

  out += fmt::format("\n  compute-stream time per rank {:>14} {:>9} {:>14} {:>9}  {}\n", "median", "% iter",
                     "max", "% iter", "worst rank");
  auto stats_row = [&](std::string_view name, const Stats& st) {
    out += fmt::format("    {:<28} {} {:>9} {} {:>9}  {}\n", name, pad_left(format_duration(TimeNs(st.median)), 14),
                       format_percent(frac(st.median, t)), pad_left(format_duration(TimeNs(st.max)), 14),
                       format_percent(frac(st.max, t)), st.worst_rank);
  };
  stats_row("busy", s.busy);
  for (int p = ir::FORWARD; p <= ir::OPTIMIZER_STEP; ++p) {
    const Stats& st = s.busy_by_phase[static_cast<size_t>(p)];
    if (st.max > 0) stats_row(fmt::format("  {}", phase_key(static_cast<ir::Phase>(p))), st);
  }
  for (Bubble b : kAllBubbles) stats_row(fmt::format("bubble {}", bubble_key(b)), s.bubbles[static_cast<int>(b)]);
  stats_row("bubble total", s.idle);

  out += "\n";
  const Stats& m = s.peak_memory;
  row(out, "peak memory per rank",
      fmt::format("min {} · median {} · max {} (rank {})", format_gb(Bytes(m.min)), format_gb(Bytes(m.median)),
                  format_gb(Bytes(m.max)), m.worst_rank));
  if (s.memory_capacity > Bytes::zero()) {
    row(out, "HBM capacity", fmt::format("{} ({:.0f} GiB); {} of {} ranks over capacity", format_gb(s.memory_capacity),
                                         s.memory_capacity.gib(), s.over_capacity_ranks, s.num_gpus));
  } else {
    row(out, "HBM capacity", "unknown");
  }

  out += "\n";
  row(out, "cost model", s.cost_model);
  row(out, "mode", s.folded ? fmt::format("folded: {} of {} ranks simulated", s.simulated_ranks, s.num_gpus)
                            : fmt::format("full: all {} ranks simulated", s.num_gpus));
  const double eps = run.wall_seconds > 0 ? static_cast<double>(run.events) / run.wall_seconds : 0.0;
  row(out, "simulation", fmt::format("{:.3f} s wall, {} events ({})", run.wall_seconds, run.events,
                                     format_si(eps, "events/s")));
  return out;
}

}  // namespace lacuna::report
