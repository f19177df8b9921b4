#include "calib/progress.h"

#include <unistd.h>

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "sim/core/clock_text.h"

namespace lacuna::calibrate {

std::string format_duration(double seconds) { return clock_text(seconds); }

Progress::Progress(int64_t total_points, double total_weight, std::FILE* out, bool tty)
    : total_(std::max<int64_t>(total_points, 0)),
      total_weight_(total_weight),
      out_(out),
      tty_(tty),
      t0_(std::chrono::steady_clock::now()) {}

bool Progress::is_tty(std::FILE* out) { return out != nullptr && ::isatty(::fileno(out)) == 1; }

double Progress::fraction() const {
  if (total_ == 0) return 1.0;
  if (total_weight_ > 0) return std::clamp(done_weight_ / total_weight_, 0.0, 1.0);
  return static_cast<double>(done_) / static_cast<double>(total_);
}

std::string Progress::status() const {
  const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0_).count();
  const double f = fraction();
  const std::string eta = f > 0 && done_ > 0 ? format_duration(elapsed * (1.0 - f) / f) : "?";
  const int width = static_cast<int>(std::to_string(total_).size());
  std::string s = fmt::format("[{:>{}}/{}] {:>3.0f}%", done_, width, total_, 100.0 * f);
  if (!label_.empty() && done_ < total_) s += "  " + label_;
  s += fmt::format("  {} elapsed, ETA {}", format_duration(elapsed), done_ >= total_ ? "0:00" : eta);
  return s;
}

void Progress::emit(bool force) {
  if (out_ == nullptr) return;
  if (tty_) {
    std::string s = status();
    const size_t w = s.size();
    if (w < last_width_) s.append(last_width_ - w, ' ');  // erase the rest of a longer previous line
    last_width_ = w;
    std::fputs(("\r" + s).c_str(), out_);
    std::fflush(out_);
    return;
  }
  const int decile = static_cast<int>(std::floor(fraction() * 10.0 + 1e-9));
  if (force || decile > last_decile_) {
    last_decile_ = decile;
    std::fputs((status() + "\n").c_str(), out_);
    std::fflush(out_);
  }
}

void Progress::start(const std::string& label) {
  label_ = label;
  if (tty_) emit(false);
}

void Progress::done(double weight) {
  ++done_;
  done_weight_ += std::max(weight, 0.0);
  emit(false);
}

void Progress::finish() {
  if (finished_) return;
  finished_ = true;
  label_.clear();
  if (tty_) {
    emit(true);
    if (out_ != nullptr) std::fputs("\n", out_);
  } else if (last_decile_ < 10) {
    emit(true);
  }
}

}  // namespace lacuna::calibrate
