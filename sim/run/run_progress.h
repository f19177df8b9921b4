// The progress line of a long `lacuna simulate` on a terminal (issue 17):
// how much of the run is done, the engine's rate, how far simulated time has
// come, and the time left. It stays silent for the first two seconds, so
// short runs print nothing, then redraws one line in place at most four
// times a second and clears it at the end. The caller attaches it only when
// stderr is a terminal: logs and pipes never see it.
//
//   simulating  42 %  6.88 M events  2.31 M events/s  simulated 1.234 s  ETA 0:04
#pragma once

#include <cstdint>
#include <cstdio>
#include <functional>
#include <string>

#include "sim/engine/simulator.h"

namespace lacuna::run {

class TerminalProgress final : public engine::ProgressSink {
 public:
  // Seconds since an arbitrary origin, monotonic; tests pass their own.
  using Clock = std::function<double()>;
  static constexpr double kSilentSeconds = 2.0;
  static constexpr double kRedrawSeconds = 0.25;

  explicit TerminalProgress(std::FILE* out, Clock clock = steady_seconds);
  ~TerminalProgress() override;

  void on_progress(uint64_t events, uint64_t ops_done, uint64_t ops_total, TimeNs now) override;
  // Clears the line if one was drawn (also done by the destructor).
  void finish();
  bool shown() const { return width_ > 0; }

  // The line for these figures after `elapsed` seconds (no '\r'), for tests.
  static std::string line(uint64_t events, uint64_t ops_done, uint64_t ops_total, TimeNs now, double elapsed);

  // Whether `out` is a terminal.
  static bool is_terminal(std::FILE* out);
  static double steady_seconds();

 private:
  std::FILE* out_;
  Clock clock_;
  double start_;
  double last_draw_ = -1;
  size_t width_ = 0;  // columns of the line on screen, 0: none
};

}  // namespace lacuna::run
