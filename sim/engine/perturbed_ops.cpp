// The simulator's side of the variability seam (perturbation.h): which
// flattened ops take the per-op hooks, the per-rank speed factor (with fold,
// the slowest member's), and the hooks themselves. Kept apart from the event
// loop so that the unperturbed path is the loop as it was.
#include <algorithm>
#include <cmath>
#include <limits>

#include "sim/engine/simulator_impl.h"

namespace lacuna::engine {
namespace {

constexpr int64_t kLatestTimeNs = std::numeric_limits<int64_t>::max();

}  // namespace

void Simulator::Impl::apply_perturbation(const ir::Program& p, const std::vector<bool>& flattened) {
  for (size_t c = 0; c < classes.size(); ++c) {
    if (!flattened[c]) continue;
    FlatClass& fc = classes[c];
    const ir::RankClass& cls = p.classes(static_cast<int>(c));
    for (size_t s = 0; s < fc.streams.size(); ++s) {
      const ir::StreamKind kind = cls.streams(static_cast<int>(s)).kind();
      for (uint32_t i = fc.streams[s].begin; i < fc.streams[s].end; ++i) {
        FlatOp& op = fc.ops[i];
        uint8_t bits = perturbation->perturbs(*fc.ir[i], kind);
        if (op.kind != OpKind::kCompute) bits &= static_cast<uint8_t>(~(kPerturbCompute | kPerturbFoldable));
        const bool foldable = bits == (kPerturbCompute | kPerturbFoldable);
        if (bits != 0 && options.fold && !foldable) {
          // A folded representative stands for ranks whose draws differ op by
          // op; no single draw is right for all of them (docs/variability.md#fold).
          throw Error(SourceLocation{{}, 0, 0, "‹fold›"},
                      "a folded run cannot stand for per-op variability (kernel noise, host pauses, launch "
                      "skew): the ranks of a class differ op by op",
                      "simulate every rank (without ‹fold›), or turn those sources off (‹ideal›)");
        }
        op.perturb = bits;
        if ((bits & kPerturbHost) != 0) op.has_host = true;
      }
    }
  }
  // Per-rank speed. A representative runs at its slowest member's factor:
  // in a synchronous job every TP, PP and DP group waits for its slowest
  // member, so the class moves at the pace of its maximum
  // (docs/variability.md#fold).
  for (size_t i = 0; i < ranks.size(); ++i) {
    SimRank& sr = ranks[i];
    double factor = 0;
    for (int32_t member : simulated.represents[i]) factor = std::max(factor, perturbation->rank_compute_factor(member));
    if (!(factor > 0) || !std::isfinite(factor)) {
      throw Error("perturbation: rank " + std::to_string(sr.rank) + " has compute factor " + std::to_string(factor) +
                  " (must be > 0 and finite)");
    }
    sr.scale *= factor;
    sr.scaled = sr.scale != 1.0;
  }
}

TimeNs Simulator::Impl::perturbed_compute(const StreamState& st, const SimRank& rk, const FlatOp& op) const {
  const FlatClass& fc = classes[rk.cls];
  const OpRef ref{rk.rank, st.local, static_cast<int32_t>(st.cursor - st.begin), st.iteration, fc.ir[st.cursor]};
  // Under fold a representative computes at its busiest member's load: the
  // members meet at the op's collectives and wait for that one.
  const double f = (op.perturb & kPerturbFoldable) != 0 && options.fold
                       ? perturbation->compute_factor_folded(
                             ref, simulated.represents[static_cast<size_t>(&rk - ranks.data())])
                       : perturbation->compute_factor(ref);
  const double v = static_cast<double>(op.value) * rk.scale * f;
  if (!(f > 0) || !std::isfinite(f) || v > 4e18) {
    throw Error(where(static_cast<uint32_t>(&st - streams.data())) + ": perturbed compute duration out of range (factor " +
                std::to_string(f) + ")");
  }
  return TimeNs(static_cast<int64_t>(std::llround(v)));
}

void Simulator::Impl::delay_on_host(uint32_t sid, TimeNs& host) const {
  const StreamState& st = streams[sid];
  const SimRank& rk = ranks[st.rank];
  const FlatClass& fc = classes[rk.cls];
  const OpRef ref{rk.rank, st.local, static_cast<int32_t>(st.cursor - st.begin), st.iteration, fc.ir[st.cursor]};
  const HostDelay d = perturbation->host_delay(ref);
  if (d.pause_ns < 0 || d.skew_ns < 0) {
    throw Error(where(sid) + ": negative host delay from the perturbation");
  }
  if (d.pause_ns > kLatestTimeNs - host.count() || d.skew_ns > kLatestTimeNs - now.count()) {
    throw Error("simulated time exceeds the int64 nanosecond range (" + where(sid) + ": host delay)");
  }
  host += TimeNs(d.pause_ns);
  if (d.skew_ns > 0) host = std::max(host, TimeNs(now + TimeNs(d.skew_ns)));
}

}  // namespace lacuna::engine
