#include "sim/parallel/batch_progress.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <string>

namespace lacuna::parallel {
namespace {

TEST(BatchProgressTest, LineCountsRateBestAndEta) {
  // 3 of 12 in 6 s: 0.5 points/s, 9 left at that rate = 18 s.
  EXPECT_EQ(BatchProgress::line(3, 12, 6.0, "points", "MFU 45.10 % (point 2: parallel.dp=4)"),
            "3/12 points  0.50 points/s  best MFU 45.10 % (point 2: parallel.dp=4)  ETA 0:18");
}

TEST(BatchProgressTest, LineWithoutBestOrProgress) {
  EXPECT_EQ(BatchProgress::line(0, 5, 0.0, "candidates", ""), "0/5 candidates  0.00 candidates/s  ETA ?");
  EXPECT_EQ(BatchProgress::line(5, 5, 10.0, "points", ""), "5/5 points  0.50 points/s  ETA 0:00");
}

TEST(BatchProgressTest, LongBestIsClippedAtACharacter) {
  const std::string best(200, 'x');
  const std::string line = BatchProgress::line(1, 2, 1.0, "points", "µ" + best);
  EXPECT_NE(line.find("best µ"), std::string::npos);
  EXPECT_NE(line.find("…  ETA"), std::string::npos);
  EXPECT_LT(line.size(), 90u);
}

// Silent for the first two seconds, then drawn in place, and cleared.
TEST(BatchProgressTest, DrawsAfterTheSilentPeriodAndClears) {
  char* text = nullptr;
  size_t size = 0;
  std::FILE* out = open_memstream(&text, &size);
  ASSERT_NE(out, nullptr);
  double now = 100.0;
  {
    BatchProgress progress(out, "points", 4, [&] { return now; });
    now += 1.0;
    progress.update(1, "");
    EXPECT_FALSE(progress.shown());
    now += 2.0;
    progress.update(2, "MFU 40.00 %");
    EXPECT_TRUE(progress.shown());
    progress.finish();
    EXPECT_FALSE(progress.shown());
  }
  std::fclose(out);
  const std::string written(text, size);
  std::free(text);
  EXPECT_EQ(written.rfind("\r2/4 points  0.67 points/s  best MFU 40.00 %  ETA 0:03", 0), 0u) << written;
  EXPECT_EQ(written.back(), '\r');
}

}  // namespace
}  // namespace lacuna::parallel
