#include "sim/sweep/line_plot_svg.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <iterator>
#include <numeric>

#include <fmt/format.h>

#include "sim/core/error.h"
#include "sim/report/formats/svg_util.h"

namespace lacuna::sweep {
namespace {

using report::svg::xml_escape;

// Page layout (px): the plot area, the legend to its right.
constexpr double kLeft = 90;
constexpr double kPlotWidth = 760;
constexpr double kLegendWidth = 300;
constexpr double kTop = 70;
constexpr double kPanelHeight = 260;
constexpr double kPanelGap = 70;  // the x labels and the next panel's name

// Colours of consecutive series (Tableau 10), repeated with a dash pattern
// after ten.
constexpr const char* kColors[] = {"#4c78a8", "#f58518", "#e45756", "#72b7b2", "#54a24b",
                                   "#eeca3b", "#b279a2", "#ff9da6", "#9d755d", "#bab0ac"};

// A tick or data label: up to 6 significant digits, no trailing zeros.
std::string label_of(double v) {
  if (v == 0) return "0";
  return fmt::format("{:.6g}", v);
}

struct XAxis {
  std::vector<double> pos;  // px of each x position
};

XAxis x_positions(const LinePlot& plot) {
  const size_t n = plot.x_text.size();
  XAxis a;
  a.pos.resize(n, kLeft + kPlotWidth / 2);
  const double pad = 30;  // px kept free at both ends
  if (plot.x_values && n > 0) {
    const std::vector<double>& x = *plot.x_values;
    const bool log = log_scale(x);
    auto f = [&](double v) { return log ? std::log(v) : v; };
    const auto [lo, hi] = std::minmax_element(x.begin(), x.end());
    const double a0 = f(*lo), a1 = f(*hi);
    for (size_t i = 0; i < n; ++i) {
      a.pos[i] = a1 > a0 ? kLeft + pad + (f(x[i]) - a0) / (a1 - a0) * (kPlotWidth - 2 * pad) : kLeft + kPlotWidth / 2;
    }
    return a;
  }
  for (size_t i = 0; i < n; ++i) {
    a.pos[i] = n > 1 ? kLeft + pad + static_cast<double>(i) / static_cast<double>(n - 1) * (kPlotWidth - 2 * pad)
                     : kLeft + kPlotWidth / 2;
  }
  return a;
}

void panel(std::string& o, const LinePlot& plot, const PlotPanel& p, const XAxis& xa, double top) {
  auto out = std::back_inserter(o);
  const double bottom = top + kPanelHeight;
  double min = INFINITY, max = -INFINITY;
  for (const PlotSeries& s : p.series) {
    for (const auto& y : s.y) {
      if (y && std::isfinite(*y)) {
        min = std::min(min, *y);
        max = std::max(max, *y);
      }
    }
  }
  if (!std::isfinite(min)) min = max = 0;
  const Ticks t = nice_ticks(min, max);
  auto y_of = [&](double v) { return bottom - (v - t.low) / (t.high - t.low) * kPanelHeight; };

  fmt::format_to(out, "<g class=\"panel\">\n");
  fmt::format_to(out, "<text x=\"{:.2f}\" y=\"{:.2f}\" font-weight=\"bold\">{}</text>\n", kLeft, top - 10,
                 xml_escape(p.y_label));
  // Horizontal grid and y labels.
  const long steps = std::lround((t.high - t.low) / t.step);
  for (long i = 0; i <= steps; ++i) {
    const double v = t.low + static_cast<double>(i) * t.step;
    const double y = y_of(v);
    fmt::format_to(out, "<line x1=\"{:.2f}\" y1=\"{:.2f}\" x2=\"{:.2f}\" y2=\"{:.2f}\" stroke=\"#e6e6e6\"/>\n", kLeft,
                   y, kLeft + kPlotWidth, y);
    fmt::format_to(out, "<text x=\"{:.2f}\" y=\"{:.2f}\" text-anchor=\"end\" fill=\"#333\">{}</text>\n", kLeft - 6,
                   y + 4, xml_escape(label_of(std::abs(v) < t.step * 1e-9 ? 0.0 : v)));
  }
  // Axes.
  fmt::format_to(out, "<line x1=\"{0:.2f}\" y1=\"{1:.2f}\" x2=\"{0:.2f}\" y2=\"{2:.2f}\" stroke=\"#333\"/>\n", kLeft,
                 top, bottom);
  fmt::format_to(out, "<line x1=\"{:.2f}\" y1=\"{:.2f}\" x2=\"{:.2f}\" y2=\"{:.2f}\" stroke=\"#333\"/>\n", kLeft,
                 bottom, kLeft + kPlotWidth, bottom);
  // x ticks at the data's positions; a label closer than 36 px to the last
  // one drawn is left out (the tick stays).
  double last_label = -1e9;
  for (size_t i = 0; i < xa.pos.size(); ++i) {
    const double x = xa.pos[i];
    fmt::format_to(out, "<line x1=\"{0:.2f}\" y1=\"{1:.2f}\" x2=\"{0:.2f}\" y2=\"{2:.2f}\" stroke=\"#333\"/>\n", x,
                   bottom, bottom + 4);
    if (x - last_label >= 36) {
      fmt::format_to(out, "<text x=\"{:.2f}\" y=\"{:.2f}\" text-anchor=\"middle\" fill=\"#333\">{}</text>\n", x,
                     bottom + 17, xml_escape(plot.x_text[i]));
      last_label = x;
    }
  }
  fmt::format_to(out, "<text x=\"{:.2f}\" y=\"{:.2f}\" text-anchor=\"middle\" fill=\"#444\">{}</text>\n",
                 kLeft + kPlotWidth / 2, bottom + 34, xml_escape(plot.x_label));
  // Lines: drawn in x order (a numeric axis's values need not be sorted).
  std::vector<size_t> order(xa.pos.size());
  std::iota(order.begin(), order.end(), size_t{0});
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return xa.pos[a] < xa.pos[b]; });
  for (size_t k = 0; k < p.series.size(); ++k) {
    const PlotSeries& s = p.series[k];
    const char* color = kColors[k % std::size(kColors)];
    const bool dashed = k >= std::size(kColors);
    std::string points;
    for (size_t i : order) {
      if (s.y[i] && std::isfinite(*s.y[i]))
        points += fmt::format("{}{:.2f},{:.2f}", points.empty() ? "" : " ", xa.pos[i], y_of(*s.y[i]));
    }
    fmt::format_to(out, "<polyline fill=\"none\" stroke=\"{}\" stroke-width=\"2\"{} points=\"{}\"/>\n", color,
                   dashed ? " stroke-dasharray=\"6 3\"" : "", points);
    for (size_t i : order) {
      if (!s.y[i] || !std::isfinite(*s.y[i])) continue;
      fmt::format_to(out,
                     "<circle cx=\"{:.2f}\" cy=\"{:.2f}\" r=\"3\" fill=\"{}\"><title>{}{}{} = {}</title></circle>\n",
                     xa.pos[i], y_of(*s.y[i]), color, xml_escape(s.label), s.label.empty() ? "" : ", ",
                     xml_escape(plot.x_label + "=" + plot.x_text[i] + ": " + p.y_label), xml_escape(label_of(*s.y[i])));
    }
  }
  fmt::format_to(out, "</g>\n");
}

void legend(std::string& o, const LinePlot& plot) {
  if (plot.panels.empty()) return;
  const std::vector<PlotSeries>& series = plot.panels.front().series;
  if (series.size() == 1 && series.front().label.empty()) return;
  auto out = std::back_inserter(o);
  const double x = kLeft + kPlotWidth + 24;
  fmt::format_to(out, "<g class=\"legend\">\n");
  for (size_t k = 0; k < series.size(); ++k) {
    const double y = kTop + 8 + static_cast<double>(k) * 18;
    const bool dashed = k >= std::size(kColors);
    fmt::format_to(
        out, "<line x1=\"{:.2f}\" y1=\"{:.2f}\" x2=\"{:.2f}\" y2=\"{:.2f}\" stroke=\"{}\" stroke-width=\"2\"{}/>\n", x,
        y, x + 22, y, kColors[k % std::size(kColors)], dashed ? " stroke-dasharray=\"6 3\"" : "");
    fmt::format_to(out, "<text x=\"{:.2f}\" y=\"{:.2f}\">{}</text>\n", x + 28, y + 4, xml_escape(series[k].label));
  }
  fmt::format_to(out, "</g>\n");
}

}  // namespace

std::optional<double> parse_number(const std::string& text) {
  const size_t b = text.find_first_not_of(" \t");
  if (b == std::string::npos) return std::nullopt;
  const size_t e = text.find_last_not_of(" \t");
  const std::string t = text.substr(b, e - b + 1);
  char* end = nullptr;
  const double v = std::strtod(t.c_str(), &end);
  if (end != t.c_str() + t.size() || !std::isfinite(v)) return std::nullopt;
  // strtod also reads "0x10" and "inf"; a swept value is decimal.
  if (t.find_first_of("xXnN") != std::string::npos) return std::nullopt;
  return v;
}

bool log_scale(const std::vector<double>& x) {
  if (x.empty()) return false;
  const auto [lo, hi] = std::minmax_element(x.begin(), x.end());
  return *lo > 0 && *hi / *lo >= 20;
}

Ticks nice_ticks(double min, double max, int target) {
  if (!(max > min)) {
    const double pad = min == 0 ? 1.0 : std::abs(min) * 0.05;
    min -= pad;
    max += pad;
  }
  const double raw = (max - min) / std::max(1, target);
  const double mag = std::pow(10.0, std::floor(std::log10(raw)));
  double step = 10 * mag;
  for (double m : {1.0, 2.0, 5.0}) {
    if (raw <= m * mag * (1 + 1e-9)) {
      step = m * mag;
      break;
    }
  }
  Ticks t;
  t.step = step;
  t.low = std::floor(min / step + 1e-9) * step;
  t.high = std::ceil(max / step - 1e-9) * step;
  if (t.high <= t.low) t.high = t.low + step;
  return t;
}

std::string render_line_plot(const LinePlot& plot) {
  for (const PlotPanel& p : plot.panels) {
    for (const PlotSeries& s : p.series) {
      if (s.y.size() != plot.x_text.size()) throw InternalError("line plot: a series has one value per x position");
    }
  }
  if (plot.x_values && plot.x_values->size() != plot.x_text.size()) {
    throw InternalError("line plot: one x value per x label");
  }
  const double width = kLeft + kPlotWidth + kLegendWidth;
  const size_t legend_rows = plot.panels.empty() ? 0 : plot.panels.front().series.size();
  const double height = std::max(kTop + 20 + static_cast<double>(plot.panels.size()) * (kPanelHeight + kPanelGap),
                                 kTop + 20 + static_cast<double>(legend_rows) * 18);
  std::string o;
  report::svg::begin_document(o, width, height);
  report::svg::title(o, kLeft, plot.title, plot.subtitle);
  const XAxis xa = x_positions(plot);
  for (size_t i = 0; i < plot.panels.size(); ++i) {
    panel(o, plot, plot.panels[i], xa, kTop + 20 + static_cast<double>(i) * (kPanelHeight + kPanelGap));
  }
  legend(o, plot);
  o += "</svg>\n";
  return o;
}

}  // namespace lacuna::sweep
