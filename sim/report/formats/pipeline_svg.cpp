#include "sim/report/formats/pipeline_svg.h"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "sim/ir/bound_program.h"
#include "sim/report/observers/bubble_accounting.h"
#include "sim/report/formats/format.h"
#include "sim/report/formats/names.h"
#include "sim/report/formats/svg_util.h"

namespace lacuna::report {

namespace {

using svg::kLeft;
using svg::kPlotWidth;
using svg::kRight;
using svg::kTop;
constexpr double kPipelineComputeH = 26;
constexpr double kLaneH = 7;
constexpr double kPipelineLaneGap = 2;
constexpr double kRowGap = 16;
constexpr double kMinLabelWidth = 16;

struct LaneStyle {
  const char* label;
  const char* color;
};
constexpr std::array<LaneStyle, kTimelineLanes> kLaneStyles = {{
    {"TP", "#54a24b"},   // green
    {"CP", "#9d755d"},   // brown
    {"PP", "#17becf"},   // cyan
    {"DP", "#505050"},   // dark grey
    {"BND", "#e45756"},  // red: encoder ↔ LLM boundary
    {"ENC", "#79706e"},  // warm grey: the encoder's own communication
}};
// Lanes whose legend entry is always shown (the others only when used).
constexpr std::array<bool, kTimelineLanes> kLaneAlwaysInLegend = {true, false, true, true, false, false};
constexpr std::array<const char*, kTimelineLanes> kLaneLegend = {"TP comm", "CP comm", "PP comm",
                                                                 "DP comm", "boundary comm", "encoder comm"};

int lane_index(CommKind k) {
  switch (k) {
    case CommKind::kTp: return 0;
    case CommKind::kCp: return 1;
    case CommKind::kPp: return 2;
    case CommKind::kDp: return 3;
    case CommKind::kBoundary: return 4;
    case CommKind::kEncoder: return 5;
    default: return -1;
  }
}

// Compute-stream idle while the host had not issued the next op (olive).
constexpr const char* kHostOverhead = "#bcbd22";

// Encoder compute: pink forward (and recompute), deep violet backward.
constexpr const char* kEncoderForward = "#e377c2";
constexpr const char* kEncoderBackward = "#5e3c99";

const char* phase_color(int phase) {
  switch (phase) {
    case ir::FORWARD: return "#4c78a8";          // blue
    case ir::BACKWARD_INPUT: return "#f58518";   // orange
    case ir::BACKWARD_WEIGHT: return "#eeca3b";  // yellow
    case ir::RECOMPUTE: return "#72b7b2";        // teal
    case ir::OPTIMIZER_STEP: return "#b279a2";   // purple
    default: return "#8c8c8c";                   // grey
  }
}

const char* compute_color(int phase, int module) {
  if (module <= 0) return phase_color(phase);
  return phase == ir::BACKWARD_INPUT || phase == ir::BACKWARD_WEIGHT ? kEncoderBackward : kEncoderForward;
}

// One rectangle per pass: same module, microbatch and chunk, same phase,
// except that interleaved B and W kernels of one backward pass (1F1B computes
// both per layer) form one rectangle coloured by the larger of the two.
// Deferred W passes (zero-bubble schedules) are not adjacent to their B and
// stay apart.
bool same_pass(const TimelineRow::ComputeSpan& a, const TimelineRow::ComputeSpan& b) {
  if (a.module != b.module || a.microbatch != b.microbatch || a.chunk != b.chunk) return false;
  auto backward = [](uint8_t p) { return p == ir::BACKWARD_INPUT || p == ir::BACKWARD_WEIGHT; };
  return a.phase == b.phase || (backward(a.phase) && backward(b.phase));
}

}  // namespace

std::string render_timeline_svg(const TimelineDocument& doc) {
  using ComputeSpan = TimelineRow::ComputeSpan;
  using Span = TimelineRow::Span;
  const std::vector<TimelineRow>& rows = doc.rows;
  const int64_t total = std::max<int64_t>(doc.end_ns, 1);
  const double scale = kPlotWidth / static_cast<double>(total);  // px per ns
  const int64_t merge_gap = static_cast<int64_t>(std::ceil(1.0 / scale));  // one pixel
  auto x = [&](int64_t ns) { return kLeft + static_cast<double>(ns) * scale; };

  std::array<bool, kTimelineLanes> lane_used{};
  bool encoder_used = false;
  bool host_used = false;
  for (const TimelineRow& r : rows) {
    host_used |= !r.host.empty();
    for (int l = 0; l < kTimelineLanes; ++l) {
      lane_used[static_cast<size_t>(l)] |= !r.comm[static_cast<size_t>(l)].empty();
    }
    for (const ComputeSpan& c : r.compute) encoder_used |= c.module > 0;
  }
  int lanes = 0;
  for (bool u : lane_used) lanes += u;
  const double row_h = kPipelineComputeH + lanes * (kLaneH + kPipelineLaneGap);
  const double rows_h = static_cast<double>(rows.size()) * (row_h + kRowGap);
  const double axis_y = kTop + rows_h;
  const double legend_y = axis_y + 44;
  const double width = kLeft + kPlotWidth + kRight;
  const double height = legend_y + 30;

  std::string o;
  o.reserve(64 * 1024);
  auto out = std::back_inserter(o);
  svg::begin_document(o, width, height);

  // Title and subtitle.
  svg::title(o, kLeft, doc.title, doc.subtitle);

  // Grid and axis.
  const svg::TimeAxis axis{kLeft, scale, total};
  svg::grid(o, axis, kTop - 6, axis_y);
  svg::time_axis(o, axis, axis_y);

  // Rows.
  for (size_t i = 0; i < rows.size(); ++i) {
    const TimelineRow& r = rows[i];
    const double y = kTop + static_cast<double>(i) * (row_h + kRowGap);
    fmt::format_to(out, "<g class=\"rank\" id=\"{}\">\n",
                   r.id.empty() ? fmt::format("rank{}", r.rank) : svg::xml_escape(r.id));
    if (r.sublabel.empty()) {
      fmt::format_to(out, "<text x=\"{:.0f}\" y=\"{:.2f}\" text-anchor=\"end\">{}</text>\n", kLeft - 8,
                     y + kPipelineComputeH / 2 + 4, svg::xml_escape(r.label));
    } else {
      fmt::format_to(out,
                     "<text x=\"{0:.0f}\" y=\"{1:.2f}\" text-anchor=\"end\" font-weight=\"bold\">{2}</text>"
                     "<text x=\"{0:.0f}\" y=\"{3:.2f}\" text-anchor=\"end\" font-size=\"9\" fill=\"#666\">{4}</text>\n",
                     kLeft - 8, y + kPipelineComputeH / 2 - 1, svg::xml_escape(r.label), y + kPipelineComputeH / 2 + 10,
                     svg::xml_escape(r.sublabel));
    }
    if (!r.note.empty() && r.compute.empty()) {
      fmt::format_to(out, "<text x=\"{:.2f}\" y=\"{:.2f}\" font-style=\"italic\" fill=\"#666\">{}</text>\n</g>\n",
                     x(0) + 8, y + kPipelineComputeH / 2 + 4, svg::xml_escape(r.note));
      continue;
    }
    const double row_width =
        r.end_ns >= doc.end_ns ? kPlotWidth : static_cast<double>(std::max<int64_t>(r.end_ns, 0)) * scale;
    fmt::format_to(out, "<rect x=\"{:.2f}\" y=\"{:.2f}\" width=\"{:.2f}\" height=\"{:.0f}\" fill=\"url(#idle)\"/>\n",
                   x(0), y, row_width, kPipelineComputeH);
    if (!r.host.empty()) {
      // Host overhead over the idle hatch, in the stream's order (spans never
      // overlap); neighbours closer than a pixel merge.
      fmt::format_to(out, "<g class=\"host\" fill=\"{}\">", kHostOverhead);
      for (size_t a = 0; a < r.host.size();) {
        int64_t end = r.host[a].end;
        size_t b = a + 1;
        while (b < r.host.size() && r.host[b].start - end < merge_gap) end = std::max(end, r.host[b++].end);
        fmt::format_to(out, "<rect x=\"{:.2f}\" y=\"{:.2f}\" width=\"{:.2f}\" height=\"{:.0f}\"/>", x(r.host[a].start),
                       y, std::max(static_cast<double>(end - r.host[a].start) * scale, 0.5), kPipelineComputeH);
        a = b;
      }
      fmt::format_to(out, "</g>\n");
    }
    for (size_t a = 0; a < r.compute.size();) {
      const ComputeSpan& first = r.compute[a];
      int64_t end = first.end;
      std::array<int64_t, ir::Phase_ARRAYSIZE> by_phase{};
      by_phase[first.phase] += first.end - first.start;
      size_t b = a + 1;
      while (b < r.compute.size() && same_pass(r.compute[b], first) && r.compute[b].start - end < merge_gap) {
        by_phase[r.compute[b].phase] += r.compute[b].end - r.compute[b].start;
        end = std::max(end, r.compute[b].end);
        ++b;
      }
      const int phase = static_cast<int>(std::max_element(by_phase.begin(), by_phase.end()) - by_phase.begin());
      const double w = static_cast<double>(end - first.start) * scale;
      fmt::format_to(out, "<rect x=\"{:.2f}\" y=\"{:.2f}\" width=\"{:.2f}\" height=\"{:.0f}\" fill=\"{}\"/>\n",
                     x(first.start), y, w, kPipelineComputeH, compute_color(phase, first.module));
      const bool per_mb = phase >= ir::FORWARD && phase <= ir::RECOMPUTE;
      if (per_mb && w >= kMinLabelWidth) {
        fmt::format_to(out,
                       "<text x=\"{:.2f}\" y=\"{:.2f}\" text-anchor=\"middle\" font-size=\"9\" fill=\"white\">{}</text>\n",
                       x(first.start) + w / 2, y + kPipelineComputeH / 2 + 3, first.microbatch);
      }
      a = b;
    }
    double lane_y = y + kPipelineComputeH + kPipelineLaneGap;
    for (int l = 0; l < kTimelineLanes; ++l) {
      if (!lane_used[static_cast<size_t>(l)]) continue;
      const LaneStyle& style = kLaneStyles[static_cast<size_t>(l)];
      fmt::format_to(out, "<text x=\"{:.0f}\" y=\"{:.2f}\" text-anchor=\"end\" font-size=\"7\" fill=\"#666\">{}</text>\n",
                     kLeft - 8, lane_y + kLaneH - 1, style.label);
      fmt::format_to(out, "<rect x=\"{:.2f}\" y=\"{:.2f}\" width=\"{:.2f}\" height=\"{:.0f}\" fill=\"#f4f4f4\"/>\n",
                     x(0), lane_y, row_width, kLaneH);
      std::vector<Span> spans = r.comm[static_cast<size_t>(l)];
      // Several streams feed one lane; sort so neighbours merge.
      std::sort(spans.begin(), spans.end(),
                [](const Span& p, const Span& q) { return p.start != q.start ? p.start < q.start : p.end < q.end; });
      fmt::format_to(out, "<g fill=\"{}\">", style.color);
      for (size_t a = 0; a < spans.size();) {
        int64_t end = spans[a].end;
        size_t b = a + 1;
        while (b < spans.size() && spans[b].start - end < merge_gap) end = std::max(end, spans[b++].end);
        fmt::format_to(out, "<rect x=\"{:.2f}\" y=\"{:.2f}\" width=\"{:.2f}\" height=\"{:.0f}\"/>", x(spans[a].start),
                       lane_y, std::max(static_cast<double>(end - spans[a].start) * scale, 0.5), kLaneH);
        a = b;
      }
      fmt::format_to(out, "</g>\n");
      lane_y += kLaneH + kPipelineLaneGap;
    }
    if (doc.mark_row_ends) {
      // A dark tick at the row's own iteration end, labelled; the label goes
      // left of the tick when it would leave the picture.
      const double xe = x(std::min(r.end_ns, total));
      const bool left = xe > kLeft + kPlotWidth - 60;
      fmt::format_to(out,
                     "<line class=\"row-end\" x1=\"{0:.2f}\" y1=\"{1:.2f}\" x2=\"{0:.2f}\" y2=\"{2:.2f}\" stroke=\"#222\" "
                     "stroke-width=\"2\"/><text x=\"{3:.2f}\" y=\"{4:.2f}\"{5} font-size=\"9\" fill=\"#222\">{6}</text>\n",
                     xe, y - 3, lane_y - kPipelineLaneGap + 1, left ? xe - 3 : xe + 3, y - 4,
                     left ? " text-anchor=\"end\"" : "", svg::xml_escape(format_duration(TimeNs(r.end_ns))));
    }
    fmt::format_to(out, "</g>\n");
  }

  // Legend.
  struct Entry {
    std::string label;
    std::string fill;
  };
  std::vector<Entry> legend = {
      {"forward", phase_color(ir::FORWARD)},          {"backward (input)", phase_color(ir::BACKWARD_INPUT)},
      {"backward (weight)", phase_color(ir::BACKWARD_WEIGHT)}, {"recompute", phase_color(ir::RECOMPUTE)},
      {"optimizer", phase_color(ir::OPTIMIZER_STEP)},
  };
  if (encoder_used) {
    legend.push_back({"encoder forward", kEncoderForward});
    legend.push_back({"encoder backward", kEncoderBackward});
  }
  for (int l = 0; l < kTimelineLanes; ++l) {
    if (kLaneAlwaysInLegend[static_cast<size_t>(l)] || lane_used[static_cast<size_t>(l)]) {
      legend.push_back({kLaneLegend[static_cast<size_t>(l)], kLaneStyles[static_cast<size_t>(l)].color});
    }
  }
  if (host_used) legend.push_back({std::string(kHostOverheadLabel), kHostOverhead});
  legend.push_back({"compute idle (bubble)", "url(#idle)"});
  fmt::format_to(out, "<g class=\"legend\">\n");
  double lx = kLeft;
  for (const Entry& e : legend) {
    fmt::format_to(out,
                   "<rect x=\"{:.2f}\" y=\"{:.2f}\" width=\"14\" height=\"14\" fill=\"{}\" stroke=\"#999\" stroke-width=\"0.5\"/>"
                   "<text x=\"{:.2f}\" y=\"{:.2f}\">{}</text>\n",
                   lx, legend_y, e.fill, lx + 18, legend_y + 11, svg::xml_escape(e.label));
    lx += 28 + 6.5 * static_cast<double>(e.label.size());
  }
  fmt::format_to(out, "</g>\n</svg>\n");
  return o;
}

const char* compute_fill(int phase, int module) { return compute_color(phase, module); }

PipelineSvg::PipelineSvg(const ir::Program& program, RankSpec spec) : program_(program), spec_(std::move(spec)) {}

void PipelineSvg::on_run_begin(const engine::RunInfo& info) {
  ranks_ = select_simulated_ranks(spec_, program_, info);
  iterations_ = std::max(1, info.iterations);
  row_of_rank_.assign(static_cast<size_t>(program_.ranks_size()), -1);
  rows_.assign(ranks_.size(), TimelineRow{});
  live_.assign(ranks_.size(), Live{});
  for (size_t i = 0; i < ranks_.size(); ++i) {
    row_of_rank_[static_cast<size_t>(ranks_[i])] = static_cast<int32_t>(i);
    rows_[i].rank = ranks_[i];
    const ir::RankClass& cls = ir::BoundProgram(program_).rank_class(ranks_[i]);
    for (int s = 0; s < cls.streams_size(); ++s) {
      if (cls.streams(s).kind() == ir::COMPUTE) {
        live_[i].main_stream = s;
        break;
      }
    }
  }
}

void PipelineSvg::on_op_end(const engine::OpSpan& span) {
  const int32_t idx = row_of_rank_[static_cast<size_t>(span.rank)];
  if (idx < 0) return;
  TimelineRow& row = rows_[static_cast<size_t>(idx)];
  const ir::Op& op = *span.ir;
  if (span.issued > span.ready && span.stream == live_[static_cast<size_t>(idx)].main_stream) {
    row.host.push_back({span.ready.count(), span.issued.count()});
  }
  if (op.has_compute()) {
    if (span.stream != live_[static_cast<size_t>(idx)].main_stream) return;
    row.compute.push_back({span.start.count(), span.end.count(), op.microbatch(), static_cast<int16_t>(op.chunk()),
                           static_cast<uint8_t>(op.phase()), static_cast<int16_t>(op.module())});
    return;
  }
  if (!op.has_collective() && !op.has_send() && !op.has_recv()) return;
  const ir::Stream& stream = ir::BoundProgram(program_).rank_class(span.rank).streams(span.stream);
  const int lane = lane_index(comm_kind(program_, stream, op));
  if (lane >= 0) row.comm[static_cast<size_t>(lane)].push_back({span.start.count(), span.end.count()});
}

void PipelineSvg::on_run_end(TimeNs end) { end_ = end; }

std::vector<TimelineRow> PipelineSvg::rows() const {
  std::vector<TimelineRow> rows = rows_;
  for (TimelineRow& r : rows) {
    r.label = rank_label(program_, r.rank);
    r.end_ns = end_.count();
  }
  return rows;
}

std::string PipelineSvg::render() const {
  const ir::ProgramInfo& info = program_.info();
  TimelineDocument doc;
  const std::string name = info.scenario_name().empty() ? std::string("lacuna") : info.scenario_name();
  doc.title = iterations_ > 1 ? fmt::format("{} — {} iterations, {}", name, iterations_, format_duration(end_))
                              : fmt::format("{} — iteration {}", name, format_duration(end_));
  doc.subtitle = fmt::format("{} GPUs · TP {} · CP {} · PP {} · DP {}", program_.ranks_size(), info.tp(), info.cp(),
                             info.pp(), info.dp());
  if (info.virtual_stages() > 1) doc.subtitle += fmt::format(" · v {}", info.virtual_stages());
  doc.subtitle += fmt::format(" · {} · {} microbatches", schedule_name(info.schedule()), info.num_microbatches());
  if (info.modules_size() > 0) doc.subtitle += fmt::format(" · {} placement", placement_name(info.placement()));
  doc.end_ns = end_.count();
  doc.rows = rows();
  return render_timeline_svg(doc);
}

}  // namespace lacuna::report
