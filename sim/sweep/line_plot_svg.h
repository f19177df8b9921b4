// Line plots as a standalone SVG (`lacuna sweep --svg`, docs/sweep.md#svg):
// one panel per metric stacked vertically, a shared x axis (numbers on a
// linear or, over a wide range, logarithmic scale; otherwise evenly spaced
// categories), one coloured line per series with a legend. Coordinates are
// printed with fixed decimals, so the same plot gives the same bytes.
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace lacuna::sweep {

struct PlotSeries {
  std::string label;                     // "" for a lone series (no legend)
  std::vector<std::optional<double>> y;  // one per x position; unset: no point there
};

struct PlotPanel {
  std::string y_label;  // the metric's name, with its unit
  std::vector<PlotSeries> series;
};

struct LinePlot {
  std::string title;
  std::string subtitle;
  std::string x_label;
  std::vector<std::string> x_text;  // the x positions' labels, in order
  // The positions' values when every label is a number (then the axis is
  // numeric); unset: categories, evenly spaced in order.
  std::optional<std::vector<double>> x_values;
  std::vector<PlotPanel> panels;
};

// Whether the axis would be logarithmic: positive values spanning a factor
// of 20 or more (GPU counts 256 … 16,384).
bool log_scale(const std::vector<double>& x);

// Axis ticks: a step of 1, 2 or 5 × 10^k giving about `target` intervals, and
// [low, high] widened to multiples of it. A flat range is widened first.
struct Ticks {
  double low = 0, high = 1, step = 1;
};
Ticks nice_ticks(double min, double max, int target = 5);

// Every x label, series label and title is escaped. Throws
// lacuna::InternalError when a series' length differs from x_text's.
std::string render_line_plot(const LinePlot& plot);

// Whether `text` is one finite number (spaces around it allowed), and which.
std::optional<double> parse_number(const std::string& text);

}  // namespace lacuna::sweep
