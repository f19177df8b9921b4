// The progress line of a batch of independent runs on a terminal (`lacuna
// sweep` points, `lacuna search` candidates): how many are done of how many,
// the rate, the best result so far and the time left. Like the progress of
// one run (sim/run/run_progress.h) it stays silent for the first two
// seconds, so short batches print nothing, redraws one line in place at most
// four times a second, and is cleared at the end. The caller creates it only
// when the stream is a terminal (is_terminal): logs and pipes never see it.
//
//   5/12 points  0.83 points/s  best point 4: MFU 45.10 % (parallel.dp=4)  ETA 0:08
#pragma once

#include <cstddef>
#include <cstdio>
#include <functional>
#include <string>
#include <string_view>

namespace lacuna::parallel {

class BatchProgress {
 public:
  // Seconds since an arbitrary origin, monotonic; tests pass their own.
  using Clock = std::function<double()>;
  static constexpr double kSilentSeconds = 2.0;
  static constexpr double kRedrawSeconds = 0.25;
  // The best result is cut to this many columns (with "…") so that the line
  // fits an 80-column terminal (a wrapped line cannot be redrawn in place).
  static constexpr size_t kBestColumns = 36;

  // `noun` counts the items ("points", "candidates").
  BatchProgress(std::FILE* out, std::string noun, size_t total, Clock clock = steady_seconds);
  ~BatchProgress();
  BatchProgress(const BatchProgress&) = delete;
  BatchProgress& operator=(const BatchProgress&) = delete;

  // `done` items of `total` finished; `best` describes the best so far ("" :
  // none yet). Not thread-safe: callers serialize (map_items' ItemDone is
  // called under a lock).
  void update(size_t done, const std::string& best);
  // Clears the line if one was drawn (also done by the destructor).
  void finish();
  bool shown() const { return width_ > 0; }

  // The line for these figures after `elapsed_s` seconds (no '\r'), for tests.
  static std::string line(size_t done, size_t total, double elapsed_s, std::string_view noun, std::string_view best);

  static bool is_terminal(std::FILE* out);
  static double steady_seconds();

 private:
  std::FILE* out_;
  std::string noun_;
  size_t total_;
  Clock clock_;
  double start_;
  double last_draw_ = -1;
  size_t width_ = 0;  // columns of the line on screen, 0: none
};

}  // namespace lacuna::parallel
