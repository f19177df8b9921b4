// The colocated three-phase schedule (colocated.h): closed-form lines for one
// and two encoders, pipelined and frozen encoders, and refusals.
#include "sim/schedule/colocated.h"

#include <gtest/gtest.h>

#include "sim/core/error.h"

namespace lacuna::schedule {
namespace {

RankActions llm_line() {
  return parse_schedule("rank 0: 0F0 0F1 0B0 0B1\n", "llm").front();
}

TEST(ColocatedThreePhase, EncoderForwardsThenTheLlmThenEncoderBackwards) {
  const RankActions line = colocated_three_phase({{"vit", 1, 0, 3, true}}, llm_line());
  EXPECT_EQ(format_schedule({line}), "rank 0: vit:0F0 vit:0F1 vit:0F2 0F0 0F1 0B0 0B1 vit:0B0 vit:0B1 vit:0B2\n");
}

TEST(ColocatedThreePhase, EncodersKeepTheirOrderInBothPhases) {
  const RankActions line =
      colocated_three_phase({{"vit", 1, 0, 2, true}, {"audio", 1, 0, 1, true}}, llm_line());
  EXPECT_EQ(format_schedule({line}),
            "rank 0: vit:0F0 vit:0F1 audio:0F0 0F0 0F1 0B0 0B1 vit:0B0 vit:0B1 audio:0B0\n");
}

// An encoder with pp 2: this rank holds its stage 1 (GPipe's line of stage
// 1); a frozen encoder's stage runs no backward.
TEST(ColocatedThreePhase, PipelinedAndFrozenEncoders) {
  const RankActions line =
      colocated_three_phase({{"vit", 2, 1, 2, true}, {"frozen", 3, 0, 2, false}}, llm_line());
  EXPECT_EQ(format_schedule({line}),
            "rank 0: vit:1F0 vit:1F1 frozen:0F0 frozen:0F1 0F0 0F1 0B0 0B1 vit:1B0 vit:1B1\n");
}

TEST(ColocatedThreePhase, RefusesWhatIsNotAnEncoderStage) {
  EXPECT_THROW(colocated_three_phase({{"", 1, 0, 1, true}}, {}), Error);
  EXPECT_THROW(colocated_three_phase({{"vit", 2, 2, 1, true}}, {}), Error);
  EXPECT_THROW(colocated_three_phase({{"vit", 1, 0, 0, true}}, {}), Error);
}

}  // namespace
}  // namespace lacuna::schedule
