// The engine's CommunicationModel seam and compute/communication
// interference, with a fake model whose answers are closed forms: every
// operation in flight shares one pipe of 1 byte/ns equally (processor sharing).
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <vector>

#include "sim/engine/engine_test_support.h"
#include "sim/engine/simulator.h"

namespace lacuna::engine {
namespace {

using namespace testing;

class SharedPipeModel : public CommunicationModel {
 public:
  std::string_view name() const override { return "shared pipe (test)"; }
  void reset() override {
    active_.clear();
    updates_.clear();
    ++resets;
  }
  void begin_collective(TimeNs now, uint64_t token, int32_t, ir::CollectiveKind, int64_t bytes) override {
    ++begins;
    add(now, token, bytes);
  }
  void begin_transfer(TimeNs now, uint64_t token, int32_t, int32_t, int64_t bytes) override {
    ++begins;
    add(now, token, bytes);
  }
  void end(TimeNs now, uint64_t token) override {
    ++ends;
    progress(now);
    active_.erase(token);
    retime(now);
  }
  std::span<const CompletionUpdate> take_updates() override {
    taken_.swap(updates_);
    updates_.clear();
    return taken_;
  }

  int begins = 0, ends = 0, resets = 0;

 private:
  void add(TimeNs now, uint64_t token, int64_t bytes) {
    progress(now);
    active_[token] = static_cast<double>(bytes);
    retime(now);
  }
  void progress(TimeNs now) {
    const double share = active_.empty() ? 0 : static_cast<double>((now - last_).count()) / active_.size();
    for (auto& [token, left] : active_) left -= share;
    last_ = now;
  }
  void retime(TimeNs now) {
    for (const auto& [token, left] : active_) {
      const double ns = std::max(0.0, left) * static_cast<double>(active_.size());
      updates_.push_back({token, now + TimeNs(static_cast<int64_t>(std::llround(ns)))});
    }
  }
  std::map<uint64_t, double> active_;
  std::vector<CompletionUpdate> updates_, taken_;
  TimeNs last_;
};

// Two groups of two ranks, each running one collective; group B's may start
// later (after a compute op of `delay_b_ns`).
ir::Program two_groups(int64_t bytes_a, int64_t bytes_b, int64_t delay_b_ns) {
  ir::Program p;
  p.add_group_slots()->set_name("tp");
  auto* a = add_class(p, "a", 0, {"comm"});
  add_collective(a->mutable_streams(0), ir::ALL_REDUCE, 0, bytes_a);
  auto* b = add_class(p, "b", 0, {"comm"});
  if (delay_b_ns > 0) add_compute(b->mutable_streams(0), delay_b_ns);
  add_collective(b->mutable_streams(0), ir::ALL_REDUCE, 0, bytes_b);
  const int32_t ga = add_group(p, ir::TP, {0, 1});
  const int32_t gb = add_group(p, ir::TP, {2, 3});
  add_rank(p, 0, {ga});
  add_rank(p, 0, {ga});
  add_rank(p, 1, {gb});
  add_rank(p, 1, {gb});
  return p;
}

TEST(CommunicationModel, ConcurrentOperationsShareAndAreRetimed) {
  // A: 1000 bytes from t=0; B: 1000 bytes from t=500. Alone until 500 (500
  // left), then half speed each: A ends at 500 + 2·500 = 1500; B has 500 left
  // and ends at 1500 + 500 = 2000.
  const ir::Program p = two_groups(1000, 1000, 500);
  ClosedFormCost cost;
  SharedPipeModel model;
  Simulator sim(p, cost, SimulationOptions{.communication = &model});
  RecordingObserver rec;
  sim.add_observer(&rec);
  const SimulationResult r = sim.run();
  EXPECT_EQ(rec.find(0, 0, 0)->end, TimeNs(1500));
  EXPECT_EQ(rec.find(2, 0, 1)->start, TimeNs(500));
  EXPECT_EQ(rec.find(2, 0, 1)->end, TimeNs(2000));
  EXPECT_EQ(r.end_time, TimeNs(2000));
  EXPECT_EQ(model.begins, 2);
  EXPECT_EQ(model.ends, 2);
  EXPECT_EQ(cost.collective_calls, 0);  // the model, not the cost model, timed them
}

TEST(CommunicationModel, RunsAreRepeatableAndResetTheModel) {
  const ir::Program p = two_groups(3000, 1000, 0);
  ClosedFormCost cost;
  SharedPipeModel model;
  Simulator sim(p, cost, SimulationOptions{.communication = &model});
  const TimeNs first = sim.run().end_time;
  const TimeNs second = sim.run().end_time;
  EXPECT_EQ(first, TimeNs(4000));  // 2·1000 shared, then 2000 alone
  EXPECT_EQ(first, second);
  EXPECT_EQ(model.resets, 2);
}

TEST(CommunicationModel, FixedDurationsBypassTheModel) {
  ir::Program p;
  p.add_group_slots()->set_name("tp");
  p.add_peer_slots()->set_name("peer");
  auto* c = add_class(p, "c", 0, {"comm"});
  add_collective(c->mutable_streams(0), ir::ALL_REDUCE, 0, 1000, /*fixed_ns=*/77);
  add_send(c->mutable_streams(0), 0, 10, 0, 1, /*fixed_ns=*/33);
  auto* d = add_class(p, "d", 0, {"comm"});
  add_collective(d->mutable_streams(0), ir::ALL_REDUCE, 0, 1000, 77);
  add_recv(d->mutable_streams(0), 0, 10, 0, 1);
  const int32_t g = add_group(p, ir::TP, {0, 1});
  add_rank(p, 0, {g}, {1});
  add_rank(p, 1, {g}, {0});
  ClosedFormCost cost;
  SharedPipeModel model;
  Simulator sim(p, cost, SimulationOptions{.communication = &model});
  EXPECT_EQ(sim.run().end_time, TimeNs(110));
  EXPECT_EQ(model.begins, 0);
}

TEST(CommunicationModel, TransfersGoThroughTheModel) {
  ir::Program p;
  p.add_peer_slots()->set_name("peer");
  auto* s = add_class(p, "s", 0, {"pp"});
  add_send(s->mutable_streams(0), 0, 400, 0, 1);
  auto* r = add_class(p, "r", 0, {"pp"});
  add_recv(r->mutable_streams(0), 0, 400, 0, 1);
  add_rank(p, 0, {}, {1});
  add_rank(p, 1, {}, {0});
  ClosedFormCost cost;
  SharedPipeModel model;
  Simulator sim(p, cost, SimulationOptions{.communication = &model});
  EXPECT_EQ(sim.run().end_time, TimeNs(400));
  EXPECT_EQ(cost.p2p_calls, 0);
}

// One rank: a 1000 ns kernel on the compute stream, and a collective of fixed
// 400 ns on the comm stream from t = 0 (a one-member group).
ir::Program overlap(int64_t comm_delay_ns) {
  ir::Program p;
  p.add_group_slots()->set_name("tp");
  auto* c = add_class(p, "c", 0, {"compute", "comm"});
  add_compute(c->mutable_streams(0), 1000);
  if (comm_delay_ns > 0) add_compute(c->mutable_streams(1), comm_delay_ns);
  add_collective(c->mutable_streams(1), ir::ALL_REDUCE, 0, 1 << 20, /*fixed_ns=*/400);
  const int32_t g = add_group(p, ir::TP, {0});
  add_rank(p, 0, {g});
  return p;
}

// The same pipe, but it puts its answers off to the take (as the flow network
// puts off its solve) and records how many calls each take answered.
class DeferringPipeModel : public SharedPipeModel {
 public:
  void begin_collective(TimeNs now, uint64_t token, int32_t g, ir::CollectiveKind k, int64_t bytes) override {
    ++pending_;
    SharedPipeModel::begin_collective(now, token, g, k, bytes);
  }
  void end(TimeNs now, uint64_t token) override {
    ++pending_;
    ended_.push_back(token);
    SharedPipeModel::end(now, token);
  }
  bool deferred() const override { return pending_ > 0; }
  // The pipe re-times every operation at every call; one that ended since
  // is left out (the contract of a deferring model).
  std::span<const CompletionUpdate> take_updates() override {
    calls_per_take.push_back(pending_);
    pending_ = 0;
    kept_.clear();
    for (const CompletionUpdate& u : SharedPipeModel::take_updates()) {
      if (std::find(ended_.begin(), ended_.end(), u.token) == ended_.end()) kept_.push_back(u);
    }
    ended_.clear();
    return kept_;
  }
  std::vector<int> calls_per_take;

 private:
  int pending_ = 0;
  std::vector<uint64_t> ended_;
  std::vector<CompletionUpdate> kept_;
};

TEST(CommunicationModel, ADeferringModelIsTakenOncePerTimestampWithTheSameResult) {
  // Both collectives begin at t = 0 and end at t = 2000 (1000 bytes each at
  // half the pipe): one take answers both begins, one both ends.
  const ir::Program p = two_groups(1000, 1000, 0);
  ClosedFormCost cost;
  SharedPipeModel eager;
  const SimulationResult want = Simulator(p, cost, SimulationOptions{.communication = &eager}).run();
  DeferringPipeModel deferring;
  const SimulationResult got = Simulator(p, cost, SimulationOptions{.communication = &deferring}).run();
  EXPECT_EQ(got.end_time, TimeNs(2000));
  EXPECT_EQ(got.end_time, want.end_time);
  EXPECT_EQ(got.iteration_ends, want.iteration_ends);
  // The settle events are bookkeeping: the event count is the eager run's.
  EXPECT_EQ(got.events, want.events);
  EXPECT_EQ(deferring.calls_per_take, (std::vector<int>{2, 2}));
}

TEST(Interference, ComputeOverlappingCommunicationSlowsByTheFactor) {
  const ir::Program p = overlap(0);
  ClosedFormCost cost;
  Simulator sim(p, cost, SimulationOptions{.compute_slowdown_under_comm = 0.5});
  RecordingObserver rec;
  sim.add_observer(&rec);
  sim.run();
  // 0–400 ns at 1/1.5 speed: 266.67 ns of work; 733.33 left at full speed,
  // rounded up to the next ns.
  EXPECT_EQ(rec.find(0, 0, 0)->end, TimeNs(1134));
  EXPECT_EQ(rec.find(0, 1, 0)->end, TimeNs(400));  // communication itself is not slowed
}

TEST(Interference, KernelStartedDuringCommunicationAndNoOverlapCases) {
  ClosedFormCost cost;
  {
    // The collective starts at 200 (after a 200 ns op on its stream) and the
    // first compute kernel ran from 0: slowed between 200 and 600.
    const ir::Program p = overlap(200);
    Simulator sim(p, cost, SimulationOptions{.compute_slowdown_under_comm = 1.0});
    RecordingObserver rec;
    sim.add_observer(&rec);
    sim.run();
    // 0–200 full (200 done), 200–600 half (200 done), 600 left → 1200.
    EXPECT_EQ(rec.find(0, 0, 0)->end, TimeNs(1200));
  }
  {
    // Without the factor nothing changes.
    const ir::Program p = overlap(0);
    Simulator sim(p, cost, SimulationOptions{});
    EXPECT_EQ(sim.run().end_time, TimeNs(1000));
  }
  {
    // Communication after the kernel ended: no slowdown.
    const ir::Program p = overlap(1000);
    Simulator sim(p, cost, SimulationOptions{.compute_slowdown_under_comm = 1.0});
    EXPECT_EQ(sim.run().end_time, TimeNs(1400));
  }
}

TEST(Interference, RejectsNegativeFactor) {
  const ir::Program p = overlap(0);
  ClosedFormCost cost;
  EXPECT_THROW(Simulator(p, cost, SimulationOptions{.compute_slowdown_under_comm = -0.1}), Error);
}

}  // namespace
}  // namespace lacuna::engine
