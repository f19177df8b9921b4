// The CUDA backend's process messages, on the CPU: round trip, truncation,
// corruption.
#include "runtime/span_io.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>

#include "sim/core/error.h"

namespace lacuna::runtime {
namespace {

using ::testing::HasSubstr;

RankOutcome sample() {
  RankOutcome o;
  o.rank = 5;
  o.emulated_ops = 3;
  o.iteration_ns = {123456789, -1, 0};
  for (int i = 0; i < 4; ++i) {
    o.spans.push_back(ExecutedSpan{i % 2, 5, i, 10 * i, 100 + i, -200 - i, std::int64_t{1} << (40 + i)});
  }
  return o;
}

std::string error_of(std::string_view bytes) {
  try {
    decode_outcome(bytes, "child for rank 5");
  } catch (const Error& e) {
    return e.what();
  }
  return "no error";
}

TEST(SpanIo, OutcomeRoundTrips) {
  const RankOutcome o = sample();
  const RankOutcome back = decode_outcome(encode_outcome(o), "test");
  EXPECT_EQ(back.rank, o.rank);
  EXPECT_EQ(back.emulated_ops, o.emulated_ops);
  EXPECT_EQ(back.error, "");
  EXPECT_EQ(back.iteration_ns, o.iteration_ns);
  ASSERT_EQ(back.spans.size(), o.spans.size());
  for (std::size_t i = 0; i < o.spans.size(); ++i) {
    EXPECT_EQ(back.spans[i].iteration, o.spans[i].iteration);
    EXPECT_EQ(back.spans[i].rank, o.spans[i].rank);
    EXPECT_EQ(back.spans[i].stream, o.spans[i].stream);
    EXPECT_EQ(back.spans[i].op, o.spans[i].op);
    EXPECT_EQ(back.spans[i].ready_ns, o.spans[i].ready_ns);
    EXPECT_EQ(back.spans[i].start_ns, o.spans[i].start_ns);
    EXPECT_EQ(back.spans[i].end_ns, o.spans[i].end_ns);
  }
}

TEST(SpanIo, AnErrorRoundTrips) {
  RankOutcome o;
  o.rank = 2;
  o.error = std::string("CUDA: out of memory\n\0binary", 28);
  EXPECT_EQ(decode_outcome(encode_outcome(o), "test").error, o.error);
}

TEST(SpanIo, EveryTruncationIsAClearError) {
  const std::string full = encode_outcome(sample());
  for (std::size_t n = 0; n < full.size(); ++n) {
    const std::string what = error_of(std::string_view(full).substr(0, n));
    EXPECT_THAT(what, HasSubstr("truncated message from child for rank 5")) << "at " << n << " bytes";
  }
  EXPECT_THAT(error_of(""), HasSubstr("closed its end without reporting"));
}

TEST(SpanIo, CorruptionIsAClearError) {
  std::string bad_magic = encode_outcome(sample());
  bad_magic[0] = 'X';
  EXPECT_THAT(error_of(bad_magic), HasSubstr("bad magic"));
  std::string bad_version = encode_outcome(sample());
  bad_version[4] = 9;
  EXPECT_THAT(error_of(bad_version), HasSubstr("format version 9"));
  EXPECT_THAT(error_of(encode_message(MessageKind::kIds, "abc")), HasSubstr("has kind 1, expected 2"));
  EXPECT_THAT(error_of(encode_outcome(sample()) + "x"), HasSubstr("bytes after the payload"));
  // A payload whose inner counts lie: more spans announced than bytes follow.
  std::string payload(4 + 4 + 8 + 8, '\0');
  payload += std::string("\xff\xff\xff\xff\x00\x00\x00\x00", 8);
  EXPECT_THAT(error_of(encode_message(MessageKind::kOutcome, payload)), HasSubstr("announces 4294967295 entries"));
}

TEST(SpanIo, HeaderGivesThePayloadSize) {
  const std::string m = encode_message(MessageKind::kIds, std::string(300, 'a'));
  EXPECT_EQ(payload_size(m.substr(0, kMessageHeaderBytes), MessageKind::kIds, "x"), 300u);
  EXPECT_EQ(decode_message(m, MessageKind::kIds, "x"), std::string(300, 'a'));
}

}  // namespace
}  // namespace lacuna::runtime
