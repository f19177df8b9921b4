// A small line-chart SVG for `lacuna efficiency --svg`: panels side by side,
// each with a log2 or linear x axis, efficiency (0–1) on y, lines for the
// model and dots for published figures. Deterministic text output.
#pragma once

#include <string>
#include <utility>
#include <vector>

namespace lacuna::cli {

struct ChartSeries {
  std::string label;
  std::string color;  // CSS colour
  bool dots = false;  // published points: markers, no line
  bool dashed = false;
  std::vector<std::pair<double, double>> points;  // (x, y), y in [0, 1]
};

struct ChartPanel {
  std::string title;
  std::string x_label;
  bool log2_x = false;
  std::vector<ChartSeries> series;
};

std::string efficiency_chart(const std::string& title, const std::string& subtitle,
                             const std::vector<ChartPanel>& panels);

}  // namespace lacuna::cli
