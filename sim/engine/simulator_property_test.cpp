// Invariants of every run, checked on random Megatron-shaped programs (random
// sizes, durations, one random slowed rank).
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <random>

#include "sim/engine/pipeline_program.h"
#include "sim/engine/simulator.h"

namespace lacuna::engine {
namespace {

using testing::ClosedFormCost;
using testing::PipelineSpec;
using testing::RecordingObserver;

ir::Program random_program(uint64_t seed) {
  std::mt19937_64 rng(seed);
  const PipelineSpec spec = testing::random_pipeline_spec(rng, seed);
  ir::Program p = make_pipeline_program(spec);
  const auto slow = static_cast<int32_t>(rng() % static_cast<uint64_t>(p.ranks_size()));
  p.mutable_ranks(slow)->set_compute_time_scale(1.0 + static_cast<double>(rng() % 50) / 10.0);
  return p;
}

TEST(SimulatorProperty, SpansRespectStreamOrderEventsAndRendezvous) {
  for (uint64_t seed = 1; seed <= 25; ++seed) {
    const ir::Program p = random_program(seed);
    ClosedFormCost cost;
    Simulator sim(p, cost);
    RecordingObserver obs;
    sim.add_observer(&obs);
    const SimulationResult result = sim.run();

    std::map<std::pair<int32_t, int32_t>, std::vector<OpSpan>> by_stream;
    TimeNs last = TimeNs::zero();
    for (const OpSpan& s : obs.spans) {
      ASSERT_LE(s.ready, s.start);
      ASSERT_LE(s.start, s.end);
      ASSERT_EQ(s.ready, s.issued) << "no host costs: the host is never late";
      if (s.ir->has_compute() || s.ir->has_record() || s.ir->has_wait()) {
        ASSERT_EQ(s.ready, s.start);
      }
      by_stream[{s.rank, s.stream}].push_back(s);
      last = std::max(last, s.end);
    }
    EXPECT_EQ(result.end_time, last) << "seed " << seed;
    // A stream reaches each op exactly when the previous one ended.
    for (auto& [key, spans] : by_stream) {
      std::sort(spans.begin(), spans.end(), [](const OpSpan& a, const OpSpan& b) { return a.op < b.op; });
      for (size_t i = 0; i < spans.size(); ++i) {
        ASSERT_EQ(spans[i].op, static_cast<int32_t>(i));
        ASSERT_EQ(spans[i].ready, i == 0 ? TimeNs::zero() : spans[i - 1].end) << "seed " << seed;
      }
    }
    // A blocked wait ends when the op before the satisfying record ended.
    for (const auto& w : obs.waits) {
      if (!w.cause.valid) continue;
      ASSERT_GE(w.span.end, w.span.ready);  // equal when the record came later at the same time
      if (w.cause.op >= 0) {
        ASSERT_EQ(w.span.end, w.cause.end);
        const auto& src = by_stream[{w.span.rank, w.cause.stream}];
        const OpSpan& released_by = src[static_cast<size_t>(w.cause.op)];
        ASSERT_EQ(released_by.end, w.cause.end);
        ASSERT_EQ(released_by.start, w.cause.start);
        ASSERT_EQ(released_by.ready, w.cause.ready);
      }
    }
    // Transfers start when the later side arrived and end together.
    for (const auto& [send, recv] : obs.transfers) {
      ASSERT_EQ(send.start, std::max(send.ready, recv.ready));
      ASSERT_EQ(send.start, recv.start);
      ASSERT_EQ(send.end, recv.end);
      ASSERT_EQ(send.ir->send().tag(), recv.ir->recv().tag());
    }
  }
}

// With random host costs (up to about a kernel, host_sync on one op in 5):
// ready <= issued <= start <= end; the host clock of every stream follows
// issue_i = (sync ? max(H, ready_i) : H) + host_ns_i, issued_i = max(ready_i,
// issue_i); ops without a rendezvous or a slot start when issued; transfers
// start when both sides were issued; and runs repeat exactly.
TEST(SimulatorProperty, HostIssueOrderAndHostClock) {
  for (uint64_t seed = 1; seed <= 25; ++seed) {
    ir::Program p = random_program(seed);
    testing::add_random_host_costs(p, seed, 3000, 5);
    ClosedFormCost cost;
    Simulator sim(p, cost);
    RecordingObserver obs, again;
    sim.add_observer(&obs);
    const SimulationResult result = sim.run();
    std::map<std::pair<int32_t, int32_t>, std::vector<OpSpan>> by_stream;
    TimeNs last = TimeNs::zero();
    for (const OpSpan& s : obs.spans) {
      ASSERT_LE(s.ready, s.issued) << "seed " << seed;
      ASSERT_LE(s.issued, s.start) << "seed " << seed;
      ASSERT_LE(s.start, s.end) << "seed " << seed;
      if (s.ir->has_compute() || s.ir->has_record() || s.ir->has_wait()) ASSERT_EQ(s.issued, s.start);
      by_stream[{s.rank, s.stream}].push_back(s);
      last = std::max(last, s.end);
    }
    EXPECT_EQ(result.end_time, last);
    int64_t late = 0;
    for (auto& [key, spans] : by_stream) {
      std::sort(spans.begin(), spans.end(), [](const OpSpan& a, const OpSpan& b) { return a.op < b.op; });
      TimeNs host = TimeNs::zero();
      for (size_t i = 0; i < spans.size(); ++i) {
        const OpSpan& s = spans[i];
        ASSERT_EQ(s.ready, i == 0 ? TimeNs::zero() : spans[i - 1].end);
        host = (s.ir->host_sync() ? std::max(host, s.ready) : host) + TimeNs(s.ir->host_ns());
        ASSERT_EQ(s.issued, std::max(s.ready, host)) << "seed " << seed << " rank " << key.first << " op " << s.op;
        late += s.issued > s.ready;
      }
    }
    EXPECT_GT(late, 0) << "seed " << seed << ": the host must be late sometimes for this test to mean anything";
    for (const auto& [send, recv] : obs.transfers) ASSERT_EQ(send.start, std::max(send.issued, recv.issued));

    Simulator second(p, cost);
    second.add_observer(&again);
    EXPECT_EQ(second.run().events, result.events);
    ASSERT_EQ(obs.spans.size(), again.spans.size());
    for (size_t i = 0; i < obs.spans.size(); ++i) {
      ASSERT_EQ(obs.spans[i].rank, again.spans[i].rank);
      ASSERT_EQ(obs.spans[i].op, again.spans[i].op);
      ASSERT_EQ(obs.spans[i].issued, again.spans[i].issued);
      ASSERT_EQ(obs.spans[i].start, again.spans[i].start);
      ASSERT_EQ(obs.spans[i].end, again.spans[i].end);
    }
  }
}

TEST(SimulatorProperty, RunsAreDeterministicAcrossSimulatorInstances) {
  for (uint64_t seed = 1; seed <= 10; ++seed) {
    const ir::Program p = random_program(seed);
    ClosedFormCost cost;
    RecordingObserver a, b;
    Simulator first(p, cost);
    first.add_observer(&a);
    Simulator second(p, cost);
    second.add_observer(&b);
    first.run();
    second.run();
    ASSERT_EQ(a.spans.size(), b.spans.size());
    for (size_t i = 0; i < a.spans.size(); ++i) {
      ASSERT_EQ(a.spans[i].rank, b.spans[i].rank);
      ASSERT_EQ(a.spans[i].stream, b.spans[i].stream);
      ASSERT_EQ(a.spans[i].op, b.spans[i].op);
      ASSERT_EQ(a.spans[i].ready, b.spans[i].ready);
      ASSERT_EQ(a.spans[i].start, b.spans[i].start);
      ASSERT_EQ(a.spans[i].end, b.spans[i].end);
    }
  }
}

TEST(SimulatorProperty, ManyStreamsBeyondTheWaitMask) {
  // 70 streams: streams >= 64 are woken by the slow path.
  ir::Program p;
  ir::RankClass* c = p.add_classes();
  c->set_num_events(1);
  for (int s = 0; s < 70; ++s) c->add_streams()->set_name("s" + std::to_string(s));
  testing::add_compute(c->mutable_streams(0), 100);
  testing::add_record(c->mutable_streams(0), 0);
  for (int s = 1; s < 70; ++s) {
    testing::add_wait(c->mutable_streams(s), 0, 1);
    testing::add_compute(c->mutable_streams(s), s);
  }
  testing::add_rank(p, 0);
  ClosedFormCost cost;
  Simulator sim(p, cost);
  RecordingObserver obs;
  sim.add_observer(&obs);
  EXPECT_EQ(sim.run().end_time, TimeNs(169));
  for (int s = 1; s < 70; ++s) EXPECT_EQ(obs.find(0, s, 1)->start, TimeNs(100)) << "stream " << s;
}

}  // namespace
}  // namespace lacuna::engine
