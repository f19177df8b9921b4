#include "sim/report/formats/format.h"

#include <gtest/gtest.h>

namespace lacuna::report {
namespace {

TEST(Format, MicrosecondsAreExactIntegerArithmetic) {
  EXPECT_EQ(micros_exact(0), "0.000");
  EXPECT_EQ(micros_exact(1), "0.001");
  EXPECT_EQ(micros_exact(1234567), "1234.567");
  EXPECT_EQ(micros_exact(9007199254740993), "9007199254740.993");  // beyond double precision
  EXPECT_EQ(micros_exact(-5), "-0.005");
}

TEST(Format, DurationsPickAnSiUnit) {
  EXPECT_EQ(format_duration(TimeNs(80)), "80 ns");
  EXPECT_EQ(format_duration(TimeNs(412'000)), "412.000 µs");
  EXPECT_EQ(format_duration(TimeNs(873'210'000)), "873.210 ms");
  EXPECT_EQ(format_duration(TimeNs(12'345'000'000)), "12.345 s");
}

TEST(Format, BytesPercentAndPrefixes) {
  EXPECT_EQ(format_gb(Bytes(74'120'000'000)), "74.12 GB");
  EXPECT_EQ(format_percent(0.4567), "45.67 %");
  EXPECT_EQ(format_si(1.5e6, "tokens/s"), "1.500 M tokens/s");
  EXPECT_EQ(format_si(12.0, "x"), "12.000 x");
}

}  // namespace
}  // namespace lacuna::report

namespace lacuna::report {
namespace {

TEST(Format, FlopsRateNeverPrintsZeroForSlowDevices) {
  EXPECT_EQ(format_flops_rate(563.4e12), "563.4 TFLOP/s");
  EXPECT_EQ(format_flops_rate(1e12), "1.0 TFLOP/s");
  EXPECT_EQ(format_flops_rate(8.56e9), "8.56 GFLOP/s");
  EXPECT_EQ(format_flops_rate(0.5e12), "500.00 GFLOP/s");
}

}  // namespace
}  // namespace lacuna::report
