// The comparison of `lacuna diff`: same-program check, errors per op class and
// stream, and the structural bubble comparison (docs/diff.md).
#include "sim/report/analyses/diff.h"

#include <algorithm>
#include <map>
#include <set>

#include <fmt/format.h>

#include "sim/core/error.h"
#include "sim/proto/program.pb.h"

namespace lacuna::report {

namespace {

[[noreturn]] void not_same_program(const DiffInput& predicted, const DiffInput& measured, const std::string& field,
                                   const std::string& what) {
  throw Error(SourceLocation{measured.file, 0, 0, field},
              fmt::format("not a run of the program of {}: {}", predicted.file, what),
              "diff a prediction and a measurement of the same compiled program");
}

std::string rank_stream(const DiffRank& r, const DiffStream& s) {
  return fmt::format("rank {} stream {} ({})", r.rank, s.stream, s.name);
}

// Same streams, same ops (index and class) in the same order.
void check_same_rank(const DiffInput& predicted, const DiffInput& measured, const DiffRank& p, const DiffRank& m,
                     size_t m_index) {
  const std::string field = fmt::format("timeline.ranks[{}]", m_index);
  if (p.streams.size() != m.streams.size()) {
    not_same_program(predicted, measured, field + ".streams",
                     fmt::format("rank {} has {} streams here and {} there", p.rank, m.streams.size(), p.streams.size()));
  }
  for (size_t s = 0; s < p.streams.size(); ++s) {
    const DiffStream& ps = p.streams[s];
    const DiffStream& ms = m.streams[s];
    const std::string sfield = fmt::format("{}.streams[{}]", field, s);
    if (ps.stream != ms.stream || ps.name != ms.name || ps.kind != ms.kind) {
      not_same_program(predicted, measured, sfield,
                       fmt::format("rank {} stream {} is {} \"{}\" ({}) here and {} \"{}\" ({}) there", p.rank, s,
                                   ms.stream, ms.name, ms.kind, ps.stream, ps.name, ps.kind));
    }
    if (ps.ops.size() != ms.ops.size()) {
      not_same_program(predicted, measured, sfield + ".ops",
                       fmt::format("{} has {} ops here and {} there", rank_stream(m, ms), ms.ops.size(), ps.ops.size()));
    }
    for (size_t k = 0; k < ps.ops.size(); ++k) {
      const DiffOp& po = ps.ops[k];
      const DiffOp& mo = ms.ops[k];
      const std::string& pc = predicted.classes[static_cast<size_t>(po.cls)];
      const std::string& mc = measured.classes[static_cast<size_t>(mo.cls)];
      if (po.op != mo.op || pc != mc) {
        not_same_program(predicted, measured, fmt::format("{}.ops[{}]", sfield, k),
                         fmt::format("{}: entry {} is op {} \"{}\" here and op {} \"{}\" there", rank_stream(m, ms), k,
                                     mo.op, mc, po.op, pc));
      }
    }
  }
}

// One gap of a compute stream in one run: where it begins and how long it is.
struct Gap {
  int64_t from_ns = 0;
  int64_t length_ns = 0;
};

// The gap before each op (start − previous listed op's end; the first op's
// from 0), then the tail (iteration end − last end). Negative gaps (clock
// skew in a measurement) count as 0.
std::vector<Gap> gaps_of(const DiffStream& s, int64_t iteration_ns) {
  std::vector<Gap> gaps;
  gaps.reserve(s.ops.size() + 1);
  int64_t prev_end = 0;
  for (const DiffOp& op : s.ops) {
    gaps.push_back({prev_end, std::max<int64_t>(op.start_ns - prev_end, 0)});
    prev_end = op.end_ns;
  }
  gaps.push_back({prev_end, std::max<int64_t>(iteration_ns - prev_end, 0)});
  return gaps;
}

void compare_bubbles(const DiffInput& predicted, const DiffInput& measured, const DiffRank& p, const DiffRank& m,
                     DiffReport& out) {
  const int main = main_compute_stream(p);
  if (main < 0) return;
  const DiffStream& ps = p.streams[static_cast<size_t>(main)];
  const DiffStream& ms = m.streams[static_cast<size_t>(main)];
  const std::vector<Gap> pg = gaps_of(ps, predicted.iteration_time_ns);
  const std::vector<Gap> mg = gaps_of(ms, measured.iteration_time_ns);
  // A zero gap is never a bubble, whatever the threshold.
  const int64_t threshold = std::max<int64_t>(out.min_bubble_ns, 1);
  for (size_t k = 0; k < pg.size(); ++k) {
    const bool in_predicted = pg[k].length_ns >= threshold;
    const bool in_measured = mg[k].length_ns >= threshold;
    out.predicted_bubbles += in_predicted;
    out.measured_bubbles += in_measured;
    out.matched_bubbles += in_predicted && in_measured;
    const bool not_observed = in_predicted && !in_measured && 2 * mg[k].length_ns < pg[k].length_ns;
    const bool not_predicted = in_measured && !in_predicted && 2 * pg[k].length_ns < mg[k].length_ns;
    if (!not_observed && !not_predicted) continue;
    BubbleMismatch b;
    b.rank = p.rank;
    b.stream = ps.stream;
    if (k < ps.ops.size()) {
      const DiffOp& op = ps.ops[k];
      b.op = op.op;
      b.cls = predicted.classes[static_cast<size_t>(op.cls)];
      b.phase = op.phase;
      b.microbatch = op.microbatch;
      b.module = op.module;
    }
    b.predicted_from_ns = pg[k].from_ns;
    b.predicted_gap_ns = pg[k].length_ns;
    b.measured_from_ns = mg[k].from_ns;
    b.measured_gap_ns = mg[k].length_ns;
    (not_observed ? out.predicted_not_observed : out.observed_not_predicted).push_back(std::move(b));
  }
}

const DiffRankBubbles* find_bubbles(const DiffInput& in, int32_t rank) {
  for (const DiffRankBubbles& b : in.rank_bubbles) {
    if (b.rank == rank) return &b;
  }
  return nullptr;
}

void sum_bubble_categories(const DiffInput& predicted, const DiffInput& measured, DiffReport& out) {
  std::vector<std::string> order;
  std::map<std::string, std::pair<int64_t, int64_t>> sums;
  auto add = [&](const DiffRankBubbles& b, bool is_predicted) {
    for (const auto& [category, ns] : b.by_category_ns) {
      if (!sums.contains(category)) order.push_back(category);
      (is_predicted ? sums[category].first : sums[category].second) += ns;
    }
  };
  for (int32_t rank : out.compared_ranks) {
    const DiffRankBubbles* p = find_bubbles(predicted, rank);
    const DiffRankBubbles* m = find_bubbles(measured, rank);
    if (p == nullptr || m == nullptr) {
      out.bubble_ranks_missing.push_back(rank);
      continue;
    }
    add(*p, true);
    add(*m, false);
  }
  for (const std::string& c : order) {
    const auto& [p, m] = sums[c];
    out.bubble_categories.push_back({c, p, m, relative_error(p, m)});
  }
}

// Biggest first; ties by rank and op so that the order is deterministic.
void sort_mismatches(std::vector<BubbleMismatch>& v, bool by_predicted) {
  std::stable_sort(v.begin(), v.end(), [by_predicted](const BubbleMismatch& a, const BubbleMismatch& b) {
    const int64_t ga = by_predicted ? a.predicted_gap_ns : a.measured_gap_ns;
    const int64_t gb = by_predicted ? b.predicted_gap_ns : b.measured_gap_ns;
    if (ga != gb) return ga > gb;
    if (a.rank != b.rank) return a.rank < b.rank;
    return a.op < b.op;
  });
}

}  // namespace

std::optional<double> relative_error(int64_t predicted, int64_t measured) {
  if (measured == 0) return std::nullopt;
  return static_cast<double>(predicted - measured) / static_cast<double>(measured);
}

int main_compute_stream(const DiffRank& r) {
  for (size_t s = 0; s < r.streams.size(); ++s) {
    if (r.streams[s].kind == "compute") return static_cast<int>(s);
  }
  return -1;
}

std::string phase_letter(int32_t phase) {
  switch (phase) {
    case ir::FORWARD: return "F";
    case ir::BACKWARD_INPUT: return "B";
    case ir::BACKWARD_WEIGHT: return "W";
    case ir::RECOMPUTE: return "R";
    case ir::OPTIMIZER_STEP: return "opt";
    case ir::DP_SYNC: return "dp";
    default: return "-";
  }
}

DiffReport diff_runs(const DiffInput& predicted, const DiffInput& measured, const DiffOptions& options) {
  // The same program: the digests agree. Files of an older lacuna carry none;
  // then the scenario's name and GPU count stand in for it.
  const bool by_digest = !predicted.program_digest.empty() && !measured.program_digest.empty();
  if (by_digest && predicted.program_digest != measured.program_digest) {
    throw Error(SourceLocation{measured.file, 0, 0, "program_digest"},
                fmt::format("program {} here, {} in {}: the two runs are of different programs",
                            measured.program_digest, predicted.program_digest, predicted.file),
                "diff a prediction and a measurement of the same program (the same scenario and flags, or the "
                "same .pb)");
  }
  if (predicted.scenario != measured.scenario) {
    throw Error(SourceLocation{measured.file, 0, 0, "scenario"},
                fmt::format("scenario \"{}\" here, \"{}\" in {}", measured.scenario, predicted.scenario, predicted.file),
                "diff a prediction and a measurement of the same program");
  }
  if (predicted.num_gpus != measured.num_gpus) {
    throw Error(SourceLocation{measured.file, 0, 0, "num_gpus"},
                fmt::format("{} GPUs here, {} in {}", measured.num_gpus, predicted.num_gpus, predicted.file),
                "diff a prediction and a measurement of the same program");
  }
  DiffReport out;
  out.predicted_file = predicted.file;
  out.measured_file = measured.file;
  out.scenario = predicted.scenario;
  out.num_gpus = predicted.num_gpus;
  out.predicted_cost_model = predicted.cost_model;
  out.measured_cost_model = measured.cost_model;
  out.predicted_iteration_ns = predicted.iteration_time_ns;
  out.measured_iteration_ns = measured.iteration_time_ns;
  out.iteration_error = relative_error(predicted.iteration_time_ns, measured.iteration_time_ns);
  if (options.min_bubble_ns) {
    out.min_bubble_ns = *options.min_bubble_ns;
    out.min_bubble_default = false;
  } else {
    out.min_bubble_ns = predicted.iteration_time_ns / 100;
  }

  std::set<int32_t> in_predicted;
  for (const DiffRank& p : predicted.ranks) {
    in_predicted.insert(p.rank);
    if (measured.find_rank(p.rank) != nullptr) {
      out.compared_ranks.push_back(p.rank);
    } else {
      out.only_predicted_ranks.push_back(p.rank);
    }
  }
  for (const DiffRank& m : measured.ranks) {
    if (!in_predicted.contains(m.rank)) out.only_measured_ranks.push_back(m.rank);
  }

  std::map<std::string, ClassDiff> by_class;
  for (int32_t rank : out.compared_ranks) {
    const DiffRank& p = *predicted.find_rank(rank);
    const DiffRank& m = *measured.find_rank(rank);
    const size_t m_index = static_cast<size_t>(&m - measured.ranks.data());
    check_same_rank(predicted, measured, p, m, m_index);
    for (size_t s = 0; s < p.streams.size(); ++s) {
      const DiffStream& ps = p.streams[s];
      const DiffStream& ms = m.streams[s];
      StreamDiff sd;
      sd.rank = rank;
      sd.stream = ps.stream;
      sd.name = ps.name;
      sd.kind = ps.kind;
      sd.ops = static_cast<int64_t>(ps.ops.size());
      for (size_t k = 0; k < ps.ops.size(); ++k) {
        const int64_t pd = ps.ops[k].end_ns - ps.ops[k].start_ns;
        const int64_t md = ms.ops[k].end_ns - ms.ops[k].start_ns;
        sd.predicted_busy_ns += pd;
        sd.measured_busy_ns += md;
        sd.predicted_end_ns = std::max(sd.predicted_end_ns, ps.ops[k].end_ns);
        sd.measured_end_ns = std::max(sd.measured_end_ns, ms.ops[k].end_ns);
        ClassDiff& c = by_class[predicted.classes[static_cast<size_t>(ps.ops[k].cls)]];
        ++c.ops;
        c.predicted_ns += pd;
        c.measured_ns += md;
      }
      sd.error = relative_error(sd.predicted_busy_ns, sd.measured_busy_ns);
      out.streams.push_back(std::move(sd));
    }
    compare_bubbles(predicted, measured, p, m, out);
  }

  for (auto& [name, c] : by_class) {
    c.cls = name;
    c.error = relative_error(c.predicted_ns, c.measured_ns);
    out.classes.push_back(std::move(c));
  }
  // Measured time descending; the map's name order breaks ties.
  std::stable_sort(out.classes.begin(), out.classes.end(), [](const ClassDiff& a, const ClassDiff& b) {
    return a.measured_ns != b.measured_ns ? a.measured_ns > b.measured_ns : a.predicted_ns > b.predicted_ns;
  });
  sort_mismatches(out.predicted_not_observed, true);
  sort_mismatches(out.observed_not_predicted, false);
  sum_bubble_categories(predicted, measured, out);
  return out;
}

}  // namespace lacuna::report
