#include "sim/parallel/batch_progress.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>

#include <fmt/format.h>

#include "sim/core/clock_text.h"

namespace lacuna::parallel {
namespace {

// Terminal columns of UTF-8 text: one per code point (continuation bytes
// take none). sim/parallel sits below sim/report, whose display_columns
// does the same.
size_t columns(std::string_view s) {
  size_t n = 0;
  for (unsigned char c : s) n += (c & 0xC0) != 0x80 ? 1 : 0;
  return n;
}

// At most `max` columns, cut at a code point boundary, "…" when cut.
std::string clip(std::string_view s, size_t max) {
  if (columns(s) <= max) return std::string(s);
  size_t kept = 0;
  size_t i = 0;
  for (; i < s.size(); ++i) {
    if ((static_cast<unsigned char>(s[i]) & 0xC0) != 0x80) {
      if (kept == max - 1) break;
      ++kept;
    }
  }
  return std::string(s.substr(0, i)) + "…";
}

}  // namespace

BatchProgress::BatchProgress(std::FILE* out, std::string noun, size_t total, Clock clock)
    : out_(out), noun_(std::move(noun)), total_(total), clock_(std::move(clock)), start_(clock_()) {}

BatchProgress::~BatchProgress() { finish(); }

bool BatchProgress::is_terminal(std::FILE* out) { return out != nullptr && ::isatty(::fileno(out)) == 1; }

double BatchProgress::steady_seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

std::string BatchProgress::line(size_t done, size_t total, double elapsed_s, std::string_view noun,
                                std::string_view best) {
  const double rate = elapsed_s > 0 ? static_cast<double>(done) / elapsed_s : 0.0;
  // ETA at the rate so far: items differ in cost, but a batch mixes them.
  const std::string eta = done > 0 && done <= total
                              ? clock_text(elapsed_s * static_cast<double>(total - done) / static_cast<double>(done))
                              : "?";
  std::string out = fmt::format("{}/{} {}  {:.2f} {}/s", done, total, noun, rate, noun);
  if (!best.empty()) out += "  best " + clip(best, kBestColumns);
  out += "  ETA " + eta;
  return out;
}

void BatchProgress::update(size_t done, const std::string& best) {
  const double t = clock_() - start_;
  if (t < kSilentSeconds) return;
  if (last_draw_ >= 0 && t - last_draw_ < kRedrawSeconds) return;
  last_draw_ = t;
  const std::string text = line(done, total_, t, noun_, best);
  const size_t width = columns(text);
  // Spaces over what a longer previous line left.
  std::fprintf(out_, "\r%s%s", text.c_str(), std::string(width_ > width ? width_ - width : 0, ' ').c_str());
  std::fflush(out_);
  width_ = std::max(width_, width);
}

void BatchProgress::finish() {
  if (width_ == 0) return;
  std::fprintf(out_, "\r%s\r", std::string(width_, ' ').c_str());
  std::fflush(out_);
  width_ = 0;
}

}  // namespace lacuna::parallel
