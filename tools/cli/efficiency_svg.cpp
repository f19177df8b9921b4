#include "tools/cli/efficiency_svg.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include <fmt/format.h>

#include "sim/report/formats/svg_util.h"

namespace lacuna::cli {
namespace {

using report::svg::xml_escape;

constexpr double kPanelWidth = 420, kPanelHeight = 300, kGap = 70, kLeft = 60, kTop = 84, kLegendLine = 16;

struct Frame {
  double left, top;
  double x_min, x_max;
  bool log2_x;
  double x(double v) const {
    const double a = log2_x ? std::log2(v) : v, lo = log2_x ? std::log2(x_min) : x_min,
                 hi = log2_x ? std::log2(x_max) : x_max;
    return left + (hi > lo ? (a - lo) / (hi - lo) : 0.5) * kPanelWidth;
  }
  double y(double v) const { return top + (1.0 - std::clamp(v, 0.0, 1.0)) * kPanelHeight; }
};

std::string x_tick_label(double v, bool log2_x) {
  if (log2_x && v >= 1024 && std::fmod(v, 1024) == 0) return fmt::format("{}k", static_cast<int64_t>(v / 1024));
  return fmt::format("{}", static_cast<int64_t>(v));
}

void panel(std::string& out, const ChartPanel& p, double left, double top) {
  double lo = std::numeric_limits<double>::infinity(), hi = -lo;
  for (const ChartSeries& s : p.series)
    for (const auto& [x, y] : s.points) lo = std::min(lo, x), hi = std::max(hi, x);
  if (!(lo <= hi)) lo = hi = 1;
  const Frame f{left, top, lo, hi, p.log2_x};

  out += fmt::format(R"(<text x="{:.1f}" y="{:.1f}" font-size="14" font-weight="bold">{}</text>)" "\n", left,
                     top - 12, xml_escape(p.title));
  // Efficiency grid every 0.1, labelled every 0.2.
  for (int i = 0; i <= 10; ++i) {
    const double v = i / 10.0, y = f.y(v);
    out += fmt::format(R"(<line x1="{:.1f}" y1="{:.1f}" x2="{:.1f}" y2="{:.1f}" stroke="#e5e5e5"/>)" "\n", left, y,
                       left + kPanelWidth, y);
    if (i % 2 == 0)
      out += fmt::format(R"(<text x="{:.1f}" y="{:.1f}" font-size="11" text-anchor="end">{:.1f}</text>)" "\n",
                         left - 6, y + 4, v);
  }
  // X ticks: powers of two on a log axis, else the points of the first series.
  std::vector<double> ticks;
  if (p.log2_x) {
    for (double v = std::exp2(std::floor(std::log2(lo))); v <= hi * 1.0001; v *= 2)
      if (v >= lo * 0.9999) ticks.push_back(v);
  } else if (!p.series.empty()) {
    for (const auto& [x, y] : p.series.front().points) ticks.push_back(x);
  }
  for (double v : ticks) {
    const double x = f.x(v);
    out += fmt::format(R"(<line x1="{:.1f}" y1="{:.1f}" x2="{:.1f}" y2="{:.1f}" stroke="#e5e5e5"/>)" "\n", x, top, x,
                       top + kPanelHeight);
    out += fmt::format(R"(<text x="{:.1f}" y="{:.1f}" font-size="11" text-anchor="middle">{}</text>)" "\n", x,
                       top + kPanelHeight + 16, x_tick_label(v, p.log2_x));
  }
  out += fmt::format(R"(<rect x="{:.1f}" y="{:.1f}" width="{}" height="{}" fill="none" stroke="#888"/>)" "\n", left,
                     top, kPanelWidth, kPanelHeight);
  out += fmt::format(R"(<text x="{:.1f}" y="{:.1f}" font-size="12" text-anchor="middle">{}</text>)" "\n",
                     left + kPanelWidth / 2, top + kPanelHeight + 36, xml_escape(p.x_label));

  for (const ChartSeries& s : p.series) {
    if (s.dots) {
      for (const auto& [x, y] : s.points)
        out += fmt::format(R"(<circle cx="{:.1f}" cy="{:.1f}" r="3.5" fill="{}" stroke="#000" stroke-width="0.6"/>)"
                           "\n",
                           f.x(x), f.y(y), s.color);
      continue;
    }
    std::string path;
    for (const auto& [x, y] : s.points) path += fmt::format("{}{:.1f},{:.1f}", path.empty() ? "M" : " L", f.x(x), f.y(y));
    out += fmt::format(R"(<path d="{}" fill="none" stroke="{}" stroke-width="1.8"{}/>)" "\n", path, s.color,
                       s.dashed ? R"( stroke-dasharray="6 4")" : "");
  }
  // Legend below the axis label.
  double ly = top + kPanelHeight + 56;
  for (const ChartSeries& s : p.series) {
    if (s.dots)
      out += fmt::format(R"(<circle cx="{:.1f}" cy="{:.1f}" r="3.5" fill="{}" stroke="#000" stroke-width="0.6"/>)" "\n",
                         left + 12, ly - 4, s.color);
    else
      out += fmt::format(R"(<line x1="{:.1f}" y1="{:.1f}" x2="{:.1f}" y2="{:.1f}" stroke="{}" stroke-width="1.8"{}/>)"
                         "\n",
                         left, ly - 4, left + 24, ly - 4, s.color, s.dashed ? R"( stroke-dasharray="6 4")" : "");
    out += fmt::format(R"(<text x="{:.1f}" y="{:.1f}" font-size="11">{}</text>)" "\n", left + 32, ly,
                       xml_escape(s.label));
    ly += kLegendLine;
  }
}

}  // namespace

std::string efficiency_chart(const std::string& title, const std::string& subtitle,
                             const std::vector<ChartPanel>& panels) {
  size_t legend = 0;
  for (const ChartPanel& p : panels) legend = std::max(legend, p.series.size());
  const double width = kLeft + static_cast<double>(panels.size()) * (kPanelWidth + kGap);
  const double height = kTop + kPanelHeight + 60 + static_cast<double>(legend) * kLegendLine + 10;
  std::string out;
  out += fmt::format(
      R"(<?xml version="1.0" encoding="UTF-8"?>)" "\n"
      R"(<svg xmlns="http://www.w3.org/2000/svg" width="{:.0f}" height="{:.0f}" font-family="sans-serif">)" "\n"
      R"(<rect width="100%" height="100%" fill="white"/>)" "\n",
      width, height);
  out += fmt::format(R"(<text x="{}" y="24" font-size="16" font-weight="bold">{}</text>)" "\n", kLeft,
                     xml_escape(title));
  out += fmt::format(R"(<text x="{}" y="44" font-size="12" fill="#555">{}</text>)" "\n", kLeft, xml_escape(subtitle));
  for (size_t i = 0; i < panels.size(); ++i)
    panel(out, panels[i], kLeft + static_cast<double>(i) * (kPanelWidth + kGap), kTop);
  out += "</svg>\n";
  return out;
}

}  // namespace lacuna::cli
