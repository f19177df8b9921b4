#include "sim/calibration/profile_io.h"

#include <filesystem>
#include <fstream>
#include <sstream>

#include <gmock/gmock.h>
#include <google/protobuf/util/message_differencer.h>
#include <gtest/gtest.h>

#include "sim/calibration/calibration_test_support.h"
#include "sim/core/error.h"

namespace lacuna::calibration {
namespace {

using ::testing::HasSubstr;
using namespace calibration::testing;

calib::CalibrationProfile sample_profile() {
  calib::CalibrationProfile p = gpu_profile();
  p.mutable_device()->set_driver_version("13.0");
  p.mutable_device()->set_sm_count(132);
  p.mutable_device()->set_memory_bytes(85899345920);
  add_table(p, ir::GEMM, ir::VARIANT_FORWARD,
            {point({1024, 4096, 4096}, 90123, 2.0 * 1024 * 4096 * 4096, 2.0 * (1024 * 4096 * 2 + 4096 * 4096)),
             point({2048, 4096, 4096}, 171234, 2.0 * 2048 * 4096 * 4096, 2.0 * (2048 * 4096 * 2 + 4096 * 4096)),
             point({4096, 4096, 4096}, 331999, 2.0 * 4096 * 4096 * 4096, 2.0 * (4096 * 4096 * 3))});
  auto& ln = add_table(p, ir::LAYERNORM, ir::VARIANT_BACKWARD_INPUT,
                       {point({2048, 1024}, 12001, 0, 2048.0 * 1024 * 6), point({4096, 1024}, 21003, 0, 4096.0 * 1024 * 6)});
  ln.mutable_points(0)->set_min_ns(11000);
  ln.mutable_points(0)->set_max_ns(15000);
  ln.mutable_points(1)->set_from_scenario(true);
  calib::CollectivePoint cp;
  cp.set_bytes(1 << 20);
  cp.set_time_ns(20000);
  *p.add_collectives() = fit_collective(ir::ALL_REDUCE, false, 8, calib::NVLINK, {cp});
  return p;
}

std::string temp_path(const std::string& name) {
  return (std::filesystem::temp_directory_path() / ("lacuna-calib-" + std::to_string(::getpid()) + "-" + name)).string();
}

std::string slurp(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

std::string error_of(const std::string& text) {
  try {
    parse_profile(text, "p.pbtxt");
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(ProfileIo, RoundTripGivesTheSameMessage) {
  const calib::CalibrationProfile p = sample_profile();
  const std::string path = temp_path("roundtrip.pbtxt");
  write_profile(p, path);
  const calib::CalibrationProfile q = read_profile(path);
  EXPECT_TRUE(google::protobuf::util::MessageDifferencer::Equals(p, q)) << slurp(path);
  // Same numbers, bit for bit (doubles are printed shortest-round-trip).
  EXPECT_EQ(q.ops(0).fit().flops_per_s(), p.ops(0).fit().flops_per_s());
  EXPECT_EQ(q.ops(0).points(2).flops(), p.ops(0).points(2).flops());
  EXPECT_EQ(q.collectives(0).bus_bandwidth_bytes_per_s(), p.collectives(0).bus_bandwidth_bytes_per_s());
  // Deterministic: writing the re-read profile gives the same bytes.
  const std::string again = temp_path("roundtrip2.pbtxt");
  write_profile(q, again);
  EXPECT_EQ(slurp(path), slurp(again));
  EXPECT_THAT(slurp(path), HasSubstr("# lacuna calibration profile"));
  // One measurement per line.
  EXPECT_THAT(slurp(path), HasSubstr("points { shape: [1024, 4096, 4096] time_ns: 90123 "));
  std::filesystem::remove(path);
  std::filesystem::remove(again);
}

TEST(ProfileIo, WriteRejectsAnInvalidProfileAndWritesNothing) {
  calib::CalibrationProfile p = sample_profile();
  p.mutable_ops(0)->mutable_points(1)->set_time_ns(-5);
  const std::string path = temp_path("invalid.pbtxt");
  EXPECT_THROW(write_profile(p, path), Error);
  EXPECT_FALSE(std::filesystem::exists(path));
}

TEST(ProfileIo, MissingFileIsAnError) {
  try {
    read_profile("/nonexistent/p.pbtxt");
    FAIL();
  } catch (const Error& e) {
    EXPECT_THAT(std::string(e.what()), HasSubstr("/nonexistent/p.pbtxt: calibration profile not found"));
  }
}

// A valid profile as text, with the offending line of each case replaced.
const char* kText = R"(format_version: 1
device {
  kind: GPU
  name: "NVIDIA H100 80GB HBM3"
}
precision: BF16
ops {
  op_class: GEMM
  variant: VARIANT_FORWARD
  points { shape: [1024, 1024, 1024] time_ns: 10000 min_ns: 9000 max_ns: 11000 repetitions: 5 flops: 2.147483648e9 bytes: 6291456 }
  points {
    shape: [2048, 1024, 1024]
    time_ns: 19000
    min_ns: 18000
    max_ns: 20000
    repetitions: 5
    flops: 4.294967296e9
    bytes: 10485760
  }
  fit { flops_per_s: 2.2e14 bytes_per_s: 0 overhead_ns: 300 }
}
)";

std::string with(std::string text, const std::string& from, const std::string& to) {
  const auto at = text.find(from);
  EXPECT_NE(at, std::string::npos) << from;
  return text.replace(at, from.size(), to);
}

TEST(ProfileValidation, TheSampleTextIsValid) { EXPECT_EQ(error_of(kText), "(no error)"); }

TEST(ProfileValidation, NegativeTimeNamesTheLineAndField) {
  EXPECT_EQ(error_of(with(kText, "time_ns: 19000", "time_ns: -5")),
            "p.pbtxt:13:5: ops[0].points[1].time_ns: must be > 0, got -5");
}

TEST(ProfileValidation, MinAboveMedian) {
  EXPECT_THAT(error_of(with(kText, "min_ns: 18000", "min_ns: 19500")),
              HasSubstr("p.pbtxt:14:5: ops[0].points[1].min_ns: min_ns 19500 exceeds the median time_ns 19000"));
}

TEST(ProfileValidation, ZeroRepetitions) {
  EXPECT_THAT(error_of(with(kText, "    repetitions: 5", "    repetitions: 0")),
              HasSubstr("p.pbtxt:16:5: ops[0].points[1].repetitions: must be > 0, got 0"));
}

TEST(ProfileValidation, BadDimensions) {
  EXPECT_THAT(error_of(with(kText, "shape: [2048, 1024, 1024]", "shape: [0, 1024, 1024]")),
              HasSubstr("p.pbtxt:12:5: ops[0].points[1].shape[0]: must be > 0, got 0"));
  EXPECT_THAT(error_of(with(kText, "shape: [2048, 1024, 1024]", "shape: [2048, -1, 1024]")),
              HasSubstr("p.pbtxt:12:5: ops[0].points[1].shape[1]: must be ≥ 0, got -1"));
  EXPECT_THAT(error_of(with(kText, "    shape: [2048, 1024, 1024]\n", "")),
              HasSubstr("p.pbtxt:11:3: ops[0].points[1].shape: must not be empty"));
  // Later dimensions may be 0 (flags such as attention's causal).
  EXPECT_EQ(error_of(with(kText, "shape: [2048, 1024, 1024]", "shape: [2048, 1024, 0]")), "(no error)");
}

TEST(ProfileValidation, MissingDevice) {
  EXPECT_EQ(error_of(with(kText, "device {\n  kind: GPU\n  name: \"NVIDIA H100 80GB HBM3\"\n}\n", "")),
            "p.pbtxt: device: is missing (the device the profile was measured on)");
}

TEST(ProfileValidation, EmptyDeviceName) {
  EXPECT_THAT(error_of(with(kText, "  name: \"NVIDIA H100 80GB HBM3\"\n", "")),
              HasSubstr("p.pbtxt:2:1: device.name: must not be empty"));
}

TEST(ProfileValidation, DuplicateShape) {
  EXPECT_THAT(error_of(with(kText, "shape: [2048, 1024, 1024]", "shape: [1024, 1024, 1024]")),
              HasSubstr("p.pbtxt:12:5: ops[0].points[1].shape: duplicate shape [1024, 1024, 1024] for GEMM "
                        "VARIANT_FORWARD (also at points[0])"));
}

TEST(ProfileValidation, DuplicateTable) {
  std::string text = kText;
  const auto start = text.find("ops {");
  text += text.substr(start);
  EXPECT_THAT(error_of(text), HasSubstr("ops[1]: a second table for GEMM VARIANT_FORWARD (the first is ops[0])"));
}

TEST(ProfileValidation, BadVersion) {
  EXPECT_EQ(error_of(with(kText, "format_version: 1", "format_version: 2")),
            "p.pbtxt:1:1: format_version: must be 1, got 2 (this lacuna reads format 1; write the profile with "
            "`lacuna calibrate` of this version)");
}

TEST(ProfileValidation, FitWithoutRates) {
  EXPECT_THAT(error_of(with(kText, "flops_per_s: 2.2e14", "flops_per_s: 0")),
              HasSubstr("p.pbtxt:20:3: ops[0].fit: flops_per_s and bytes_per_s are both 0"));
  EXPECT_THAT(error_of(with(kText, "overhead_ns: 300", "overhead_ns: -1")),
              HasSubstr("p.pbtxt:20:44: ops[0].fit.overhead_ns: must be finite and ≥ 0, got -1"));
}

TEST(ProfileValidation, CorruptTextNamesLineAndColumn) {
  const std::string e = error_of(with(kText, "    max_ns: 20000", "    max_ns: 20000 }}}"));
  EXPECT_THAT(e, HasSubstr("p.pbtxt:15:"));
  EXPECT_THAT(e, HasSubstr("sim/proto/calibration.proto"));
  EXPECT_THAT(error_of(with(kText, "time_ns: 19000", "time_nanos: 19000")),
              HasSubstr("p.pbtxt:13:15: Message type \"lacuna.calib.Measurement\" has no field named \"time_nanos\""));
}

TEST(ProfileValidation, CollectiveFitMustBePositive) {
  const std::string text = std::string(kText) +
                           "collectives { kind: ALL_REDUCE group_size: 8 link: NVLINK latency_ns: 5000 "
                           "bus_bandwidth_bytes_per_s: 0 }\n";
  EXPECT_THAT(error_of(text), HasSubstr("p.pbtxt:22:76: collectives[0].bus_bandwidth_bytes_per_s: must be finite and > 0"));
  const std::string small = std::string(kText) +
                            "collectives { kind: ALL_REDUCE group_size: 1 link: NVLINK bus_bandwidth_bytes_per_s: 1e9 }\n";
  EXPECT_THAT(error_of(small), HasSubstr("collectives[0].group_size: must be ≥ 2, got 1"));
}

}  // namespace
}  // namespace lacuna::calibration
