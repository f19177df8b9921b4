#include "sim/report/formats/heatmap_svg.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <iterator>

#include <fmt/format.h>

#include "sim/report/formats/format.h"
#include "sim/report/formats/names.h"
#include "sim/report/formats/svg_util.h"

namespace lacuna::report {

namespace {

// Light yellow (little) to dark red (much), ColorBrewer YlOrRd.
constexpr std::array<std::array<int, 3>, 5> kScale = {{
    {255, 255, 204}, {254, 217, 118}, {253, 141, 60}, {227, 26, 28}, {128, 0, 38}}};

std::string colour(double t) {
  t = std::clamp(t, 0.0, 1.0) * static_cast<double>(kScale.size() - 1);
  const size_t i = std::min(static_cast<size_t>(t), kScale.size() - 2);
  const double f = t - static_cast<double>(i);
  int c[3];
  for (int k = 0; k < 3; ++k) {
    c[k] = static_cast<int>(std::lround(kScale[i][static_cast<size_t>(k)] * (1 - f) + kScale[i + 1][static_cast<size_t>(k)] * f));
  }
  return fmt::format("#{:02x}{:02x}{:02x}", c[0], c[1], c[2]);
}

struct Layout {
  int32_t nodes = 1;           // N
  int32_t gpus = 1;            // G per node
  int32_t nodes_per_row = 1;   // C
  int32_t rows = 1;
  int32_t cell = 4;            // px
  double width = 0, height = 0;
  // Top-left of `rank`'s cell within a panel.
  double x(int32_t node, int32_t gpu) const { return (node % nodes_per_row) * (gpus * cell + 1) + gpu * cell; }
  double y(int32_t node) const { return (node / nodes_per_row) * (cell + 1); }
};

Layout layout(const ir::Program& p) {
  Layout l;
  l.nodes = 1;
  l.gpus = std::max<int32_t>(1, static_cast<int32_t>(p.cluster().gpus_per_node()));
  for (const ir::RankBinding& b : p.ranks()) {
    l.nodes = std::max(l.nodes, b.node() + 1);
    l.gpus = std::max(l.gpus, b.local_gpu() + 1);
  }
  // About 4:3 in cells: C·G / (N / C) ≈ 4/3.
  l.nodes_per_row = std::clamp(static_cast<int32_t>(std::lround(std::sqrt(4.0 * l.nodes / (3.0 * l.gpus)))), 1, l.nodes);
  l.rows = (l.nodes + l.nodes_per_row - 1) / l.nodes_per_row;
  const int32_t cells = l.nodes_per_row * l.gpus;
  l.cell = std::clamp((600 - (l.nodes_per_row - 1)) / cells, 2, 24);
  l.width = cells * l.cell + (l.nodes_per_row - 1);
  l.height = l.rows * (l.cell + 1) - 1;
  return l;
}

struct Range {
  int64_t min = 0, max = 0, median = 0;
  int32_t min_rank = 0, max_rank = 0;
};

Range range_of(const std::vector<int64_t>& v) {
  Range r;
  if (v.empty()) return r;
  r.min = r.max = v[0];
  for (size_t i = 1; i < v.size(); ++i) {
    if (v[i] < r.min) r.min = v[i], r.min_rank = static_cast<int32_t>(i);
    if (v[i] > r.max) r.max = v[i], r.max_rank = static_cast<int32_t>(i);
  }
  std::vector<int64_t> sorted = v;
  std::nth_element(sorted.begin(), sorted.begin() + static_cast<std::ptrdiff_t>((sorted.size() - 1) / 2), sorted.end());
  r.median = sorted[(sorted.size() - 1) / 2];
  return r;
}

void panel(std::string& o, const ir::Program& p, const Layout& l, double x0, double y0, const std::string& name,
           const std::vector<int64_t>& values, const HeatmapData& d) {
  auto out = std::back_inserter(o);
  const Range r = range_of(values);
  fmt::format_to(out, "<text x=\"{:.0f}\" y=\"{:.0f}\" font-weight=\"bold\">{}</text>\n", x0, y0 - 22,
                 svg::xml_escape(name));
  // Node offsets along a row, when there is room to print them.
  if (l.gpus * l.cell >= 22) {
    for (int32_t c = 0; c < l.nodes_per_row; ++c) {
      fmt::format_to(out, "<text x=\"{:.1f}\" y=\"{:.0f}\" text-anchor=\"middle\" fill=\"#666\">+{}</text>\n",
                     x0 + c * (l.gpus * l.cell + 1) + l.gpus * l.cell / 2.0, y0 - 6, c);
    }
  }
  const double span = static_cast<double>(r.max - r.min);
  fmt::format_to(out, "<g stroke=\"none\">\n");
  for (int32_t rank = 0; rank < p.ranks_size(); ++rank) {
    const ir::RankBinding& b = p.ranks(rank);
    const int64_t v = values[static_cast<size_t>(rank)];
    const double t = span > 0 ? static_cast<double>(v - r.min) / span : 0.5;
    fmt::format_to(out,
                   "<rect x=\"{:.0f}\" y=\"{:.0f}\" width=\"{}\" height=\"{}\" fill=\"{}\"><title>rank {} (node {} "
                   "gpu {}): {}</title></rect>\n",
                   x0 + l.x(b.node(), b.local_gpu()), y0 + l.y(b.node()), l.cell, l.cell, colour(t), rank, b.node(),
                   b.local_gpu(), format_duration(TimeNs(v)));
  }
  fmt::format_to(out, "</g>\n");
  if (!d.on_path.empty() && l.cell >= 3) {
    fmt::format_to(out, "<g fill=\"none\" stroke=\"#000\" stroke-width=\"1\" class=\"critical\">\n");
    for (int32_t rank = 0; rank < p.ranks_size(); ++rank) {
      if (!d.on_path[static_cast<size_t>(rank)]) continue;
      const ir::RankBinding& b = p.ranks(rank);
      fmt::format_to(out, "<rect x=\"{:.1f}\" y=\"{:.1f}\" width=\"{}\" height=\"{}\"/>\n",
                     x0 + l.x(b.node(), b.local_gpu()) + 0.5, y0 + l.y(b.node()) + 0.5, l.cell - 1, l.cell - 1);
    }
    fmt::format_to(out, "</g>\n");
  }
  // The colour scale below the panel: min, median and max with their ranks.
  const double ly = y0 + l.height + 14;
  const double bar = std::max(l.width, 300.0);  // room for the min and max labels
  for (int i = 0; i < 48; ++i) {
    fmt::format_to(out, "<rect x=\"{:.2f}\" y=\"{:.0f}\" width=\"{:.2f}\" height=\"10\" fill=\"{}\"/>\n",
                   x0 + bar * i / 48.0, ly, bar / 48.0 + 0.05, colour((i + 0.5) / 48.0));
  }
  fmt::format_to(out, "<text x=\"{:.0f}\" y=\"{:.0f}\">{} (rank {})</text>\n", x0, ly + 24,
                 svg::xml_escape(format_duration(TimeNs(r.min))), r.min_rank);
  fmt::format_to(out, "<text x=\"{:.0f}\" y=\"{:.0f}\" text-anchor=\"end\">{} (rank {})</text>\n", x0 + bar, ly + 24,
                 svg::xml_escape(format_duration(TimeNs(r.max))), r.max_rank);
  fmt::format_to(out, "<text x=\"{:.0f}\" y=\"{:.0f}\" fill=\"#444\">median {}</text>\n", x0, ly + 38,
                 svg::xml_escape(format_duration(TimeNs(r.median))));
}

}  // namespace

std::string render_heatmap(const ir::Program& p, const HeatmapData& d) {
  const Layout l = layout(p);
  constexpr double kLabels = 90, kTopPanel = svg::kTop + 40;
  // Room for the panel titles and scales even when the cluster is small.
  const double pitch = std::max(l.width, 340.0) + 60;
  const double width = kLabels + pitch + std::max(l.width, 340.0) + svg::kRight;
  const double height = kTopPanel + l.height + 70;
  std::string o;
  svg::begin_document(o, width, height);
  const std::string name = p.info().scenario_name().empty() ? "(unnamed)" : p.info().scenario_name();
  svg::title(o, kLabels, name + " — compute and peer wait per GPU",
             fmt::format("{} GPUs: {} nodes × {} GPUs, {} nodes per row, GPUs of a node side by side; iteration {}{}{}",
                         p.ranks_size(), l.nodes, l.gpus, l.nodes_per_row, format_duration(d.iteration),
                         d.on_path.empty() ? "" : "; outlined: ranks on the critical path",
                         d.folded ? "; folded: each rank shows its class representative" : ""));
  auto out = std::back_inserter(o);
  // Row labels: the first node of a row, as often as there is room.
  const int32_t every = std::max(1, (14 + l.cell) / (l.cell + 1));
  for (int32_t row = 0; row < l.rows; row += every) {
    fmt::format_to(out, "<text x=\"{:.0f}\" y=\"{:.1f}\" text-anchor=\"end\" fill=\"#444\">node {}</text>\n", kLabels - 6,
                   kTopPanel + row * (l.cell + 1) + l.cell / 2.0 + 4, row * l.nodes_per_row);
  }
  panel(o, p, l, kLabels, kTopPanel, "compute time (busy, main compute stream)", d.compute_ns, d);
  panel(o, p, l, kLabels + pitch, kTopPanel, "peer wait (collectives and transfers waiting for others)",
        d.wait_ns, d);
  o += "</svg>\n";
  return o;
}

}  // namespace lacuna::report
