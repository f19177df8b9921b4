#include "sim/run/run_progress.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>

#include <fmt/format.h>

#include "sim/core/clock_text.h"
#include "sim/report/formats/format.h"

namespace lacuna::run {

TerminalProgress::TerminalProgress(std::FILE* out, Clock clock)
    : out_(out), clock_(std::move(clock)), start_(clock_()) {}

TerminalProgress::~TerminalProgress() { finish(); }

bool TerminalProgress::is_terminal(std::FILE* out) { return out != nullptr && ::isatty(::fileno(out)) == 1; }

double TerminalProgress::steady_seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

std::string TerminalProgress::line(uint64_t events, uint64_t ops_done, uint64_t ops_total, TimeNs now,
                                   double elapsed) {
  const double fraction =
      ops_total > 0 ? std::min(1.0, static_cast<double>(ops_done) / static_cast<double>(ops_total)) : 0.0;
  // ETA by the ops left at the rate so far: the engine's cost per op is
  // roughly even over a training iteration.
  const std::string eta = fraction > 0 ? clock_text(elapsed * (1.0 - fraction) / fraction) : "?";
  const double rate = elapsed > 0 ? static_cast<double>(events) / elapsed : 0.0;
  return fmt::format("simulating  {:.0f} %  {}  {}  simulated {}  ETA {}", 100.0 * fraction,
                     report::format_si(static_cast<double>(events), "events"), report::format_si(rate, "events/s"),
                     report::format_duration(now), eta);
}

void TerminalProgress::on_progress(uint64_t events, uint64_t ops_done, uint64_t ops_total, TimeNs now) {
  const double t = clock_() - start_;
  if (t < kSilentSeconds) return;
  if (last_draw_ >= 0 && t - last_draw_ < kRedrawSeconds) return;
  last_draw_ = t;
  const std::string text = line(events, ops_done, ops_total, now, t);
  const size_t columns = report::display_columns(text);
  // Spaces over what a longer previous line left.
  std::fprintf(out_, "\r%s%s", text.c_str(), std::string(width_ > columns ? width_ - columns : 0, ' ').c_str());
  std::fflush(out_);
  width_ = std::max(width_, columns);
}

void TerminalProgress::finish() {
  if (width_ == 0) return;
  std::fprintf(out_, "\r%s\r", std::string(width_, ' ').c_str());
  std::fflush(out_);
  width_ = 0;
}

}  // namespace lacuna::run
