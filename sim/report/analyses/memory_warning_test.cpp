// The over-capacity warning of `lacuna simulate` (docs/outputs.md).
#include "sim/report/analyses/memory_warning.h"

#include <gtest/gtest.h>

#include <sstream>

#include "sim/report/formats/format.h"

namespace lacuna::report {
namespace {

Summary summary_with(int32_t over, int64_t capacity) {
  Summary s;
  s.num_gpus = 8;
  s.memory_capacity = Bytes(capacity);
  s.over_capacity_ranks = over;
  RankAccount r;
  r.rank = 3;
  r.baseline_memory = Bytes(6'000'000'000);
  r.activation_peak = Bytes(4'000'000'000);
  r.peak_memory = Bytes(10'600'000'000);  // 15 % reserve
  s.ranks = {r};
  s.peak_memory.max = r.peak_memory.count();
  s.peak_memory.worst_rank = 3;
  return s;
}

TEST(MemoryWarning, NoneWhenEveryRankFitsOrTheCapacityIsUnknown) {
  EXPECT_EQ(memory_warning(summary_with(0, 80'000'000'000)), "");
  EXPECT_EQ(memory_warning(summary_with(2, 0)), "");
}

TEST(MemoryWarning, BoxedWithTheCountsThePeakAndTheBreakdown) {
  const std::string w = memory_warning(summary_with(2, 10'000'000'000));
  EXPECT_NE(w.find("WARNING: 2 of 8 ranks exceed HBM (peak 10.60 GB > 10.00 GB): this iteration cannot run"),
            std::string::npos)
      << w;
  EXPECT_NE(w.find("rank 3: model state and overheads 6.00 GB, activations 4.00 GB, allocator reserve 0.60"),
            std::string::npos)
      << w;
  EXPECT_NE(w.find("`strict-memory` makes this an error (exit 4)"), std::string::npos) << w;
  // Every line of the box has the same width, the first and last are bars.
  std::istringstream in(w);
  std::string line, first, last;
  size_t width = 0;
  int lines = 0;
  while (std::getline(in, line)) {
    if (lines++ == 0) {
      first = line;
      width = display_columns(line);
    }
    EXPECT_EQ(display_columns(line), width) << line;
    last = line;
  }
  EXPECT_GE(lines, 5);
  EXPECT_EQ(first, last);
  EXPECT_EQ(first.find_first_not_of(" !"), std::string::npos);
}

}  // namespace
}  // namespace lacuna::report
