// A Megatron-shaped synthetic Program for engine tests and benchmarks:
// tp × pp × dp ranks (rank = (pp·dp + dp_i)·tp + tp_i, one node per TP group, so
// that all replicas see the same topology and fold is exact), one
// class per pipeline stage, GPipe order (all forwards, then all backwards).
// Streams per rank: compute, tp_comm, pp_send, pp_recv, dp_comm. Per layer: a
// compute kernel, then an all-reduce on tp_comm ordered by events; between
// stages, rendezvous p2p (forward on channel 0, backward on channel 1); at the
// end a data-parallel all-reduce. Compute durations vary per stage and layer
// (from `seed`), so schedules are not trivially symmetric in time.
#pragma once

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "sim/engine/engine_test_support.h"

namespace lacuna::engine::testing {

struct PipelineSpec {
  int32_t tp = 2;
  int32_t pp = 3;
  int32_t dp = 2;
  int32_t microbatches = 4;
  int32_t layers_per_stage = 2;
  uint64_t seed = 1;
  bool fixed_comm = false;   // fixed durations instead of the cost model
  int64_t tp_bytes = 4096;   // per all-reduce
  int64_t pp_bytes = 20000;  // per transfer
  int64_t dp_bytes = 1 << 20;
};

enum PipelineEvent : int32_t { kTpIn, kTpOut, kRecvDone, kSendReady, kDpReady, kNumPipelineEvents };

inline int32_t pipeline_rank(const PipelineSpec& s, int32_t tp_i, int32_t dp_i, int32_t pp_i) {
  return (pp_i * s.dp + dp_i) * s.tp + tp_i;
}

// A random Megatron-shaped spec for property tests, drawn from `rng` in this
// order: tp in [1, max_tp], pp in [1, 4], dp in [1, 3], microbatches in
// [1, max_microbatches], layers per stage in [1, 3], fixed or modelled
// communication. `seed` seeds the durations.
inline PipelineSpec random_pipeline_spec(std::mt19937_64& rng, uint64_t seed, int32_t max_tp = 4,
                                         int32_t max_microbatches = 4) {
  PipelineSpec spec;
  spec.tp = 1 + static_cast<int32_t>(rng() % static_cast<uint64_t>(max_tp));
  spec.pp = 1 + static_cast<int32_t>(rng() % 4);
  spec.dp = 1 + static_cast<int32_t>(rng() % 3);
  spec.microbatches = 1 + static_cast<int32_t>(rng() % static_cast<uint64_t>(max_microbatches));
  spec.layers_per_stage = 1 + static_cast<int32_t>(rng() % 3);
  spec.fixed_comm = rng() % 2 == 0;
  spec.seed = seed;
  return spec;
}

inline ir::Program make_pipeline_program(const PipelineSpec& s) {
  ir::Program p;
  p.mutable_info()->set_num_ranks(s.tp * s.pp * s.dp);
  auto* tp_slot = p.add_group_slots();
  tp_slot->set_name("tp");
  tp_slot->set_kind(ir::TP);
  auto* dp_slot = p.add_group_slots();
  dp_slot->set_name("dp");
  dp_slot->set_kind(ir::DP);
  p.add_peer_slots()->set_name("pp_prev");
  p.add_peer_slots()->set_name("pp_next");
  std::mt19937_64 rng(s.seed);
  std::uniform_int_distribution<int64_t> dur(500, 5000);

  for (int32_t stage = 0; stage < s.pp; ++stage) {
    ir::RankClass* c = add_class(p, "stage" + std::to_string(stage), kNumPipelineEvents,
                                 {"compute", "tp_comm", "pp_send", "pp_recv", "dp_comm"});
    ir::Stream* compute = c->mutable_streams(0);
    ir::Stream* tp = c->mutable_streams(1);
    ir::Stream* send = c->mutable_streams(2);
    ir::Stream* recv = c->mutable_streams(3);
    ir::Stream* dp = c->mutable_streams(4);
    std::vector<int64_t> layer_ns(static_cast<size_t>(s.layers_per_stage));
    for (auto& d : layer_ns) d = dur(rng);
    int64_t tp_in = 0, recvs = 0, sends = 0;
    const bool first = stage == 0, last = stage == s.pp - 1;
    auto pass = [&](int32_t mb, bool forward) {
      const bool receives = forward ? !first : !last;
      const bool sends_out = forward ? !last : !first;
      if (receives) {
        add_recv(recv, forward ? 0 : 1, s.pp_bytes, forward ? 0 : 1, mb);
        add_record(recv, kRecvDone);
        add_wait(compute, kRecvDone, ++recvs);
      }
      for (int64_t ns : layer_ns) {
        add_compute(compute, forward ? ns : 2 * ns);
        add_record(compute, kTpIn);
        ++tp_in;
        add_wait(tp, kTpIn, tp_in);
        add_collective(tp, ir::ALL_REDUCE, 0, s.tp_bytes, s.fixed_comm ? 300 : 0);
        add_record(tp, kTpOut);
        add_wait(compute, kTpOut, tp_in);
      }
      if (sends_out) {
        add_record(compute, kSendReady);
        add_wait(send, kSendReady, ++sends);
        add_send(send, forward ? 1 : 0, s.pp_bytes, forward ? 0 : 1, mb, s.fixed_comm ? 700 : 0);
      }
    };
    for (int32_t mb = 0; mb < s.microbatches; ++mb) pass(mb, true);
    for (int32_t mb = s.microbatches - 1; mb >= 0; --mb) pass(mb, false);
    add_record(compute, kDpReady);
    add_wait(dp, kDpReady, 1);
    add_collective(dp, ir::ALL_REDUCE, 1, s.dp_bytes, s.fixed_comm ? 9000 : 0);
  }

  // Groups: tp groups then dp groups, indexed for the bindings below.
  std::vector<int32_t> tp_group(static_cast<size_t>(s.pp * s.dp));
  for (int32_t pp_i = 0; pp_i < s.pp; ++pp_i) {
    for (int32_t dp_i = 0; dp_i < s.dp; ++dp_i) {
      std::vector<int32_t> members;
      for (int32_t t = 0; t < s.tp; ++t) members.push_back(pipeline_rank(s, t, dp_i, pp_i));
      tp_group[static_cast<size_t>(pp_i * s.dp + dp_i)] = add_group(p, ir::TP, members);
    }
  }
  std::vector<int32_t> dp_group(static_cast<size_t>(s.pp * s.tp));
  for (int32_t pp_i = 0; pp_i < s.pp; ++pp_i) {
    for (int32_t t = 0; t < s.tp; ++t) {
      std::vector<int32_t> members;
      for (int32_t dp_i = 0; dp_i < s.dp; ++dp_i) members.push_back(pipeline_rank(s, t, dp_i, pp_i));
      dp_group[static_cast<size_t>(pp_i * s.tp + t)] = add_group(p, ir::DP, members);
    }
  }
  for (int32_t pp_i = 0; pp_i < s.pp; ++pp_i) {
    for (int32_t dp_i = 0; dp_i < s.dp; ++dp_i) {
      for (int32_t t = 0; t < s.tp; ++t) {
        const int32_t r = pipeline_rank(s, t, dp_i, pp_i);
        const int32_t prev = pp_i > 0 ? pipeline_rank(s, t, dp_i, pp_i - 1) : -1;
        const int32_t next = pp_i + 1 < s.pp ? pipeline_rank(s, t, dp_i, pp_i + 1) : -1;
        ir::RankBinding* b = add_rank(p, pp_i,
                                      {tp_group[static_cast<size_t>(pp_i * s.dp + dp_i)],
                                       dp_group[static_cast<size_t>(pp_i * s.tp + t)]},
                                      {prev, next}, r / s.tp);
        b->mutable_coord()->set_tp(t);
        b->mutable_coord()->set_dp(dp_i);
        b->mutable_coord()->set_pp(pp_i);
      }
    }
  }
  return p;
}

}  // namespace lacuna::engine::testing
