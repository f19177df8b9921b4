// A progress line on stderr for `lacuna calibrate`: points done / total, the
// kernel being measured, elapsed time and ETA. On a terminal the line is
// rewritten in place with '\r'; otherwise (a log file, CI) one line is
// printed per 10 % of the work, so logs stay short.
#pragma once

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <string>

namespace lacuna::calibrate {

class Progress {
 public:
  // `total_weight`: the estimated seconds of all points (ETA is weighted by
  // it); 0 weighs every point equally.
  Progress(int64_t total_points, double total_weight, std::FILE* out, bool tty);
  // Whether `out` is a terminal.
  static bool is_tty(std::FILE* out);

  void start(const std::string& label);  // the point now measured
  void done(double weight);              // it finished; weight as in the constructor
  void finish();                         // ends the line (TTY) or prints the last line

  // The text of the current status, e.g. "[ 12/40] 30%  GEMM fwd [..]  0:07 elapsed, ETA 0:16".
  std::string status() const;
  int64_t points_done() const { return done_; }

 private:
  void emit(bool force);
  double fraction() const;

  int64_t total_;
  double total_weight_;
  std::FILE* out_;
  bool tty_;
  int64_t done_ = 0;
  double done_weight_ = 0;
  std::string label_;
  int last_decile_ = -1;
  size_t last_width_ = 0;
  bool finished_ = false;
  std::chrono::steady_clock::time_point t0_;
};

// "1:05", "1:02:03".
std::string format_duration(double seconds);

}  // namespace lacuna::calibrate
