#include "sim/report/formats/svg_util.h"

#include <iterator>

#include <fmt/format.h>

namespace lacuna::report::svg {

std::string xml_escape(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (char c : s) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      case '\'': out += "&apos;"; break;
      default: out += c;
    }
  }
  return out;
}

int64_t tick_step(int64_t total_ns) {
  for (int64_t step = 1;; step *= 10) {
    for (int64_t m : {1, 2, 5}) {
      if (total_ns / (step * m) <= 12) return step * m;
    }
  }
}

std::string tick_label(int64_t ns, int64_t step_ns) {
  int decimals = 0;
  for (int64_t unit = 1'000'000; unit > step_ns && decimals < 6; unit /= 10) ++decimals;
  return fmt::format("{:.{}f} ms", static_cast<double>(ns) * 1e-6, decimals);
}

void begin_document(std::string& o, double width, double height) {
  auto out = std::back_inserter(o);
  fmt::format_to(out,
                 "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
                 "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{0:.0f}\" height=\"{1:.0f}\" "
                 "viewBox=\"0 0 {0:.0f} {1:.0f}\" font-family=\"Helvetica, Arial, sans-serif\" font-size=\"11\">\n",
                 width, height);
  fmt::format_to(out,
                 "<defs>\n<pattern id=\"idle\" patternUnits=\"userSpaceOnUse\" width=\"6\" height=\"6\" "
                 "patternTransform=\"rotate(45)\"><rect width=\"6\" height=\"6\" fill=\"{}\"/>"
                 "<line x1=\"0\" y1=\"0\" x2=\"0\" y2=\"6\" stroke=\"{}\" stroke-width=\"2\"/></pattern>\n</defs>\n",
                 kIdleFill, kIdleHatch);
  fmt::format_to(out, "<rect x=\"0\" y=\"0\" width=\"{:.0f}\" height=\"{:.0f}\" fill=\"white\"/>\n", width, height);
}

void title(std::string& o, double x, std::string_view title, std::string_view subtitle) {
  auto out = std::back_inserter(o);
  fmt::format_to(out, "<text x=\"{:.0f}\" y=\"24\" font-size=\"16\" font-weight=\"bold\">{}</text>\n", x,
                 xml_escape(title));
  fmt::format_to(out, "<text x=\"{:.0f}\" y=\"44\" fill=\"#444\">{}</text>\n", x, xml_escape(subtitle));
}

void grid(std::string& o, const TimeAxis& axis, double top, double bottom) {
  auto out = std::back_inserter(o);
  const int64_t step = tick_step(axis.total_ns);
  fmt::format_to(out, "<g stroke=\"#e6e6e6\" stroke-width=\"1\">\n");
  // Counted, not `t += step`: near INT64_MAX the sum would wrap and the loop
  // would write lines until memory ran out (issue 16).
  for (int64_t i = 0, n = axis.total_ns / step; i <= n; ++i) {
    const int64_t t = i * step;
    fmt::format_to(out, "<line x1=\"{0:.2f}\" y1=\"{1:.2f}\" x2=\"{0:.2f}\" y2=\"{2:.2f}\"/>\n", axis.x(t), top, bottom);
  }
  fmt::format_to(out, "</g>\n");
}

void time_axis(std::string& o, const TimeAxis& axis, double y) {
  auto out = std::back_inserter(o);
  const int64_t step = tick_step(axis.total_ns);
  fmt::format_to(out, "<g class=\"axis\">\n<line x1=\"{:.2f}\" y1=\"{:.2f}\" x2=\"{:.2f}\" y2=\"{:.2f}\" stroke=\"#333\"/>\n",
                 axis.x(0), y, axis.x(axis.total_ns), y);
  for (int64_t i = 0, n = axis.total_ns / step; i <= n; ++i) {
    const int64_t t = i * step;
    fmt::format_to(out,
                   "<line x1=\"{0:.2f}\" y1=\"{1:.2f}\" x2=\"{0:.2f}\" y2=\"{2:.2f}\" stroke=\"#333\"/>"
                   "<text x=\"{0:.2f}\" y=\"{3:.2f}\" text-anchor=\"middle\">{4}</text>\n",
                   axis.x(t), y, y + 5, y + 18, tick_label(t, step));
  }
  fmt::format_to(out, "<text x=\"{:.2f}\" y=\"{:.2f}\" text-anchor=\"middle\" fill=\"#444\">time</text>\n</g>\n",
                 axis.x(axis.total_ns / 2), y + 34);
}

}  // namespace lacuna::report::svg
