#include "sim/report/formats/diff_svg.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <iterator>
#include <string_view>
#include <vector>

#include <fmt/format.h>

#include "sim/core/error.h"
#include "sim/report/formats/diff_format.h"
#include "sim/report/formats/format.h"
#include "sim/report/formats/pipeline_svg.h"
#include "sim/report/formats/svg_util.h"

namespace lacuna::report {

namespace {

using svg::kLeft;
using svg::kPlotWidth;
using svg::kRight;
using svg::kTop;
constexpr double kHeadingH = 20;
constexpr double kComputeH = 22;
constexpr double kCommH = 9;
constexpr double kLaneGap = 3;
constexpr double kHalfGap = 18;

constexpr const char* kNotObservedStroke = "#d62728";  // red, dashed
constexpr const char* kNotPredictedStroke = "#111111";  // black, solid

struct Geometry {
  int64_t total_ns;
  double scale;        // px per ns
  int64_t merge_gap;   // one pixel in ns: closer same-coloured ops merge
  double x(int64_t ns) const { return kLeft + static_cast<double>(ns) * scale; }
  double w(int64_t ns) const { return static_cast<double>(ns) * scale; }
};

double lane_height(const DiffStream& s) { return s.kind == "compute" ? kComputeH : kCommH; }

double half_height(const DiffRank& r) {
  double h = kHeadingH;
  for (const DiffStream& s : r.streams) h += lane_height(s) + kLaneGap;
  return h;
}

// One stream's ops, consecutive ops of one colour closer than a pixel merged
// so that a rank with tens of thousands of kernels stays a small file.
void draw_ops(std::string& o, const Geometry& g, const DiffStream& s, double y, double h) {
  auto out = std::back_inserter(o);
  for (size_t a = 0; a < s.ops.size();) {
    const char* fill = compute_fill(s.ops[a].phase, s.ops[a].module);
    int64_t end = s.ops[a].end_ns;
    size_t b = a + 1;
    while (b < s.ops.size() && std::string_view(compute_fill(s.ops[b].phase, s.ops[b].module)) == fill &&
           s.ops[b].start_ns - end < g.merge_gap) {
      end = std::max(end, s.ops[b++].end_ns);
    }
    fmt::format_to(out, "<rect x=\"{:.2f}\" y=\"{:.2f}\" width=\"{:.2f}\" height=\"{:.0f}\" fill=\"{}\"/>\n",
                   g.x(s.ops[a].start_ns), y, std::max(g.w(end - s.ops[a].start_ns), 0.5), h, fill);
    a = b;
  }
}

void draw_outlines(std::string& o, const Geometry& g, const std::vector<BubbleMismatch>& list, int32_t rank,
                   bool predicted_half, double y, bool not_observed) {
  auto out = std::back_inserter(o);
  for (const BubbleMismatch& b : list) {
    if (b.rank != rank) continue;
    const int64_t from = predicted_half ? b.predicted_from_ns : b.measured_from_ns;
    const int64_t gap = predicted_half ? b.predicted_gap_ns : b.measured_gap_ns;
    fmt::format_to(out,
                   "<rect class=\"{}\" x=\"{:.2f}\" y=\"{:.2f}\" width=\"{:.2f}\" height=\"{:.0f}\" fill=\"none\" "
                   "stroke=\"{}\" stroke-width=\"2\"{}/>\n",
                   not_observed ? "bubble-not-observed" : "bubble-not-predicted", g.x(from), y - 1,
                   std::max(g.w(gap), 2.0), kComputeH + 2, not_observed ? kNotObservedStroke : kNotPredictedStroke,
                   not_observed ? " stroke-dasharray=\"4 2\"" : "");
  }
}

// One run's streams of the rank, from `y`; returns the height used.
double draw_half(std::string& o, const Geometry& g, const char* id, const std::string& heading, const DiffRank& r,
                 int64_t iteration_ns, const DiffReport& report, bool predicted_half, double y) {
  auto out = std::back_inserter(o);
  fmt::format_to(out, "<g class=\"half\" id=\"{}\">\n", id);
  fmt::format_to(out, "<text x=\"{:.0f}\" y=\"{:.2f}\" font-weight=\"bold\">{}</text>\n", kLeft, y + 13,
                 svg::xml_escape(heading));
  double lane_y = y + kHeadingH;
  const double row_width = g.w(std::min(iteration_ns, g.total_ns));
  const int main = main_compute_stream(r);
  for (size_t s = 0; s < r.streams.size(); ++s) {
    const DiffStream& st = r.streams[s];
    const double h = lane_height(st);
    fmt::format_to(out, "<text x=\"{:.0f}\" y=\"{:.2f}\" text-anchor=\"end\" font-size=\"{}\" fill=\"#444\">{}</text>\n",
                   kLeft - 8, lane_y + h - (h > kCommH ? 7 : 1), h > kCommH ? 11 : 8, svg::xml_escape(st.name));
    // Idle compute shows through the hatch; other lanes on light grey.
    fmt::format_to(out, "<rect x=\"{:.2f}\" y=\"{:.2f}\" width=\"{:.2f}\" height=\"{:.0f}\" fill=\"{}\"/>\n", g.x(0),
                   lane_y, row_width, h, st.kind == "compute" ? "url(#idle)" : "#f4f4f4");
    draw_ops(o, g, st, lane_y, h);
    if (static_cast<int>(s) == main) {
      draw_outlines(o, g, report.predicted_not_observed, r.rank, predicted_half, lane_y, true);
      draw_outlines(o, g, report.observed_not_predicted, r.rank, predicted_half, lane_y, false);
    }
    lane_y += h + kLaneGap;
  }
  // The run's own iteration end.
  const double xe = g.x(std::min(iteration_ns, g.total_ns));
  fmt::format_to(out,
                 "<line class=\"row-end\" x1=\"{0:.2f}\" y1=\"{1:.2f}\" x2=\"{0:.2f}\" y2=\"{2:.2f}\" stroke=\"#222\" "
                 "stroke-width=\"2\"/>\n</g>\n",
                 xe, y + kHeadingH - 3, lane_y - kLaneGap + 1);
  return lane_y - y;
}

}  // namespace

int32_t diff_svg_rank(const DiffReport& report, std::optional<int32_t> requested, const std::string& option) {
  if (report.compared_ranks.empty()) {
    throw Error(SourceLocation{report.measured_file, 0, 0, "timeline.ranks"},
                fmt::format("no rank is in the timelines of both {} and this file: nothing to draw",
                            report.predicted_file),
                "write both files with the same rank selection");
  }
  if (!requested) return report.compared_ranks.front();
  if (std::find(report.compared_ranks.begin(), report.compared_ranks.end(), *requested) ==
      report.compared_ranks.end()) {
    std::string ranks;
    for (int32_t r : report.compared_ranks) ranks += (ranks.empty() ? "" : ", ") + std::to_string(r);
    throw Error(SourceLocation{{}, 0, 0, option},
                fmt::format("rank {} is not in the timelines of both files", *requested),
                fmt::format("choose one of {}", ranks));
  }
  return *requested;
}

std::string render_diff_svg(const DiffInput& predicted, const DiffInput& measured, const DiffReport& report,
                            int32_t rank) {
  const DiffRank* p = predicted.find_rank(rank);
  const DiffRank* m = measured.find_rank(rank);
  if (p == nullptr || m == nullptr) {
    throw Error(SourceLocation{{}, 0, 0, "rank"}, fmt::format("rank {} is not in the timelines of both files", rank));
  }
  Geometry g;
  g.total_ns = std::max<int64_t>({predicted.iteration_time_ns, measured.iteration_time_ns, 1});
  g.scale = kPlotWidth / static_cast<double>(g.total_ns);
  g.merge_gap = static_cast<int64_t>(std::ceil(1.0 / g.scale));

  const double p_h = half_height(*p);
  const double m_h = half_height(*m);
  const double axis_y = kTop + p_h + kHalfGap + m_h + 4;
  const double legend_y = axis_y + 44;
  const double width = kLeft + kPlotWidth + kRight;
  const double height = legend_y + 30;

  std::string o;
  o.reserve(64 * 1024);
  auto out = std::back_inserter(o);
  svg::begin_document(o, width, height);

  const std::string title =
      fmt::format("{} — {}: predicted {} vs measured {} (error {})", report.scenario, p->label,
                  format_duration(TimeNs(report.predicted_iteration_ns)),
                  format_duration(TimeNs(report.measured_iteration_ns)), format_error_percent(report.iteration_error));
  const std::string subtitle = fmt::format("predicted: {} · measured: {} · bubbles ≥ {}", report.predicted_file,
                                           report.measured_file, format_duration(TimeNs(report.min_bubble_ns)));
  svg::title(o, kLeft, title, subtitle);

  // Grid lines behind both halves.
  const svg::TimeAxis axis{kLeft, g.scale, g.total_ns};
  svg::grid(o, axis, kTop - 6, axis_y);

  auto heading = [](const char* which, const std::string& model, int64_t ns) {
    return model.empty() ? fmt::format("{} · {}", which, format_duration(TimeNs(ns)))
                         : fmt::format("{} · {} · {}", which, format_duration(TimeNs(ns)), model);
  };
  draw_half(o, g, "predicted", heading("predicted", report.predicted_cost_model, report.predicted_iteration_ns), *p,
            report.predicted_iteration_ns, report, true, kTop);
  draw_half(o, g, "measured", heading("measured", report.measured_cost_model, report.measured_iteration_ns), *m,
            report.measured_iteration_ns, report, false, kTop + p_h + kHalfGap);

  svg::time_axis(o, axis, axis_y);

  // Legend: the phases, then idle and the two outlines.
  struct Entry {
    const char* label;
    std::string fill;
    std::string stroke;  // empty: a thin grey frame
    bool dashed = false;
  };
  const std::vector<Entry> legend = {
      {"forward", compute_fill(1, 0), {}},
      {"backward (input)", compute_fill(2, 0), {}},
      {"backward (weight)", compute_fill(3, 0), {}},
      {"recompute", compute_fill(4, 0), {}},
      {"optimizer", compute_fill(5, 0), {}},
      {"encoder forward", compute_fill(1, 1), {}},
      {"encoder backward", compute_fill(2, 1), {}},
      {"other (comm, DP sync)", compute_fill(0, 0), {}},
      {"compute idle", "url(#idle)", {}},
      {"predicted, not observed", "none", kNotObservedStroke, true},
      {"observed, not predicted", "none", kNotPredictedStroke},
  };
  fmt::format_to(out, "<g class=\"legend\">\n");
  double lx = kLeft;
  for (const Entry& e : legend) {
    fmt::format_to(out,
                   "<rect x=\"{:.2f}\" y=\"{:.2f}\" width=\"14\" height=\"14\" fill=\"{}\" stroke=\"{}\" "
                   "stroke-width=\"{}\"{}/><text x=\"{:.2f}\" y=\"{:.2f}\">{}</text>\n",
                   lx, legend_y, e.fill, e.stroke.empty() ? "#999" : e.stroke, e.stroke.empty() ? "0.5" : "2",
                   e.dashed ? " stroke-dasharray=\"4 2\"" : "", lx + 18,
                   legend_y + 11, svg::xml_escape(e.label));
    lx += 28 + 6.0 * static_cast<double>(std::string_view(e.label).size());
  }
  fmt::format_to(out, "</g>\n</svg>\n");
  return o;
}

}  // namespace lacuna::report
