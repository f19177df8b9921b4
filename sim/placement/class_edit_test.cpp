#include "sim/placement/class_edit.h"

#include <gtest/gtest.h>

#include "sim/core/error.h"

namespace lacuna::placement {
namespace {

// A compiled class as the stage compiler leaves it: compute and tp streams,
// three events.
ir::RankClass compiled() {
  ir::RankClass c;
  c.set_name("pp0");
  c.set_num_events(3);
  for (const auto& [name, kind] : {std::pair{"compute", ir::COMPUTE}, {"tp", ir::TP_COMM}}) {
    auto* s = c.add_streams();
    s->set_name(name);
    s->set_kind(kind);
    s->add_ops()->set_phase(ir::FORWARD);
  }
  return c;
}

TEST(ClassEditor, StreamsAndEventsAreMadeOnceByNameAfterTheClassOwn) {
  ir::RankClass c = compiled();
  ClassEditor ed(c);
  EXPECT_EQ(ed.compute(), 0);
  EXPECT_EQ(ed.stream("tp", ir::TP_COMM), 1);
  const int32_t dp = ed.stream("enc_dp", ir::DP_COMM);
  EXPECT_EQ(dp, 2);
  EXPECT_EQ(ed.stream("enc_dp", ir::DP_COMM), dp);
  EXPECT_EQ(c.streams_size(), 3);
  EXPECT_THROW(ed.stream("enc_dp", ir::BOUNDARY), InternalError);
  // Events continue the class's numbering, one per key.
  EXPECT_EQ(ed.event("a"), 3);
  EXPECT_EQ(ed.event("b"), 4);
  EXPECT_EQ(ed.event("a"), 3);
  EXPECT_EQ(c.num_events(), 5);
}

// Records count per event (timeline counters); a handoff records on one
// stream and waits on the other for that value; every op carries its context.
TEST(ClassEditor, RecordsCountAndOpsCarryTheirContext) {
  ir::RankClass c = compiled();
  ClassEditor ed(c);
  const int32_t dp = ed.stream("enc_dp", ir::DP_COMM), bnd = ed.stream("boundary", ir::BOUNDARY);
  const compiler::OpContext ctx{ir::BACKWARD_INPUT, 3, 0, 7, 2};
  EXPECT_EQ(ed.record(dp, ed.event("x"), ctx), 1);
  EXPECT_EQ(ed.record(dp, ed.event("x"), ctx), 2);
  EXPECT_EQ(ed.handoff(dp, bnd, "x", ctx), 3);
  const ir::Stream& b = c.streams(bnd);
  ASSERT_EQ(b.ops_size(), 1);
  EXPECT_EQ(b.ops(0).wait().value(), 3);
  EXPECT_EQ(b.ops(0).wait().event(), ed.event("x"));
  EXPECT_EQ(b.ops(0).phase(), ir::BACKWARD_INPUT);
  EXPECT_EQ(b.ops(0).microbatch(), 3);
  EXPECT_EQ(b.ops(0).layer(), 7);
  EXPECT_EQ(b.ops(0).module(), 2);
  ed.stream_at(dp).add_ops();
  EXPECT_EQ(c.streams(dp).ops_size(), 4);
}

// Compute ops go to the caller's block, to be spliced where it chooses.
TEST(ClassEditor, ComputeOpsGoToTheBlockThenSpliceInPlace) {
  ir::RankClass c = compiled();
  ClassEditor ed(c);
  const compiler::OpContext ctx{ir::FORWARD, 0, 0, -1, 1};
  EXPECT_THROW(ed.add(ed.compute(), ctx), InternalError);
  std::vector<ir::Op> front, back;
  ed.set_compute_block(&front);
  ed.add(ed.compute(), ctx)->set_microbatch(10);
  ed.set_compute_block(&back);
  ed.add(ed.compute(), ctx)->set_microbatch(11);
  EXPECT_EQ(c.streams(0).ops_size(), 1);
  splice(*c.mutable_streams(0), {{1, back}, {0, front}});
  ASSERT_EQ(c.streams(0).ops_size(), 3);
  EXPECT_EQ(c.streams(0).ops(0).microbatch(), 10);
  EXPECT_EQ(c.streams(0).ops(2).microbatch(), 11);
  EXPECT_EQ(c.streams(0).ops(2).module(), 1);
  EXPECT_THROW(splice(*c.mutable_streams(0), {{4, {}}}), Error);
}

TEST(ClassEditor, AClassWithoutComputeGetsOne) {
  ir::RankClass c;
  ClassEditor ed(c);
  ASSERT_EQ(c.streams_size(), 1);
  EXPECT_EQ(c.streams(ed.compute()).kind(), ir::COMPUTE);
  EXPECT_EQ(c.streams(ed.compute()).name(), "compute");
}

}  // namespace
}  // namespace lacuna::placement
