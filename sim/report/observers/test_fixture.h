// Test-only: a hand-built two-rank program and a scripted replay of engine
// callbacks whose bubble attribution is known exactly by construction.
#pragma once

#include <ostream>
#include <vector>

#include "sim/engine/observer.h"
#include "sim/proto/program.pb.h"

namespace lacuna {
// Readable gtest failure messages for times.
inline void PrintTo(TimeNs t, std::ostream* os) { *os << t.count() << " ns"; }
}  // namespace lacuna

namespace lacuna::report::testing {

// Streams of the single class.
inline constexpr int kCompute = 0, kRecv = 1, kTp = 2, kDp = 3, kSend = 4;

inline ir::Op make_wait(int event, int value) {
  ir::Op op;
  op.mutable_wait()->set_event(event);
  op.mutable_wait()->set_value(value);
  return op;
}
inline ir::Op make_record(int event) {
  ir::Op op;
  op.mutable_record()->set_event(event);
  return op;
}
inline ir::Op make_compute(ir::Phase phase, int mb, int layer, ir::KernelRole role, int64_t memory_delta = 0) {
  ir::Op op;
  op.set_phase(phase);
  op.set_microbatch(mb);
  op.set_layer(layer);
  op.mutable_compute()->set_op_class(ir::GEMM);
  op.mutable_compute()->set_role(role);
  op.mutable_compute()->set_flops(1e9);
  op.mutable_compute()->set_memory_delta_bytes(memory_delta);
  return op;
}

// Two ranks (pp 0 and pp 1) of one class. Compute stream:
//   0 wait  1 F mb0 (+300 B)  2 wait  3 wait  4 B mb0 (-300 B)  5 wait  6 optimizer
// pp_recv: 0 recv, 1 record, 2 recv, 3 record, 4 recv, 5 record
// tp: 0 AG on slot "tp"; dp: 0 RS on slot "dp_cp"; pp_send: 0 send.
inline ir::Program two_rank_program() {
  ir::Program p;
  ir::ProgramInfo* info = p.mutable_info();
  info->set_scenario_name("tiny <two> & ranks");
  info->set_num_ranks(2);
  info->set_tokens_per_iteration(4000);
  info->set_model_flops_per_iteration(8e6);
  info->set_hardware_flops_per_iteration(1e7);
  info->set_peak_flops_per_gpu(1e10);
  info->set_tp(1);
  info->set_cp(1);
  info->set_pp(2);
  info->set_dp(1);
  info->set_virtual_stages(1);
  info->set_num_microbatches(1);
  info->set_schedule(scenario::ONE_F_ONE_B);
  p.mutable_cluster()->mutable_gpu()->set_hbm_capacity_gib(2000.0 / 1073741824.0);  // 2000 bytes

  ir::Slot* tp = p.add_group_slots();
  tp->set_name("tp");
  tp->set_kind(ir::TP);
  ir::Slot* dp = p.add_group_slots();
  dp->set_name("dp_cp");
  dp->set_kind(ir::DP_CP);
  p.add_peer_slots()->set_name("pp_prev");
  p.add_peer_slots()->set_name("pp_next");
  for (int r = 0; r < 2; ++r) {
    ir::Group* g = p.add_groups();
    g->set_kind(ir::TP);
    g->add_ranks(r);
  }

  ir::RankClass* cls = p.add_classes();
  cls->set_name("stage");
  cls->set_num_events(2);
  cls->mutable_memory()->set_weights_bytes(1000);
  cls->mutable_memory()->set_gradients_bytes(500);
  cls->mutable_memory()->set_optimizer_bytes(200);
  cls->mutable_memory()->set_other_bytes(100);

  ir::Stream* compute = cls->add_streams();
  compute->set_name("compute");
  compute->set_kind(ir::COMPUTE);
  *compute->add_ops() = make_wait(0, 1);
  *compute->add_ops() = make_compute(ir::FORWARD, 0, 0, ir::ROLE_QKV, 300);
  *compute->add_ops() = make_wait(1, 1);
  *compute->add_ops() = make_wait(0, 2);
  *compute->add_ops() = make_compute(ir::BACKWARD_INPUT, 0, 0, ir::ROLE_FC2, -300);
  *compute->add_ops() = make_wait(0, 3);
  ir::Op opt = make_compute(ir::OPTIMIZER_STEP, 0, -1, ir::ROLE_OPTIMIZER_STEP);
  *compute->add_ops() = opt;

  ir::Stream* recv = cls->add_streams();
  recv->set_name("pp_recv");
  recv->set_kind(ir::PP_RECV);
  for (int i = 0; i < 3; ++i) {
    ir::Op op;
    op.set_microbatch(0);
    op.mutable_recv()->set_peer_slot(0);
    op.mutable_recv()->set_bytes(64);
    op.mutable_recv()->set_tag(i);
    *recv->add_ops() = op;
    *recv->add_ops() = make_record(0);
  }

  ir::Stream* tps = cls->add_streams();
  tps->set_name("tp");
  tps->set_kind(ir::TP_COMM);
  ir::Op ag;
  ag.set_phase(ir::FORWARD);
  ag.mutable_collective()->set_kind(ir::ALL_GATHER);
  ag.mutable_collective()->set_group_slot(0);
  ag.mutable_collective()->set_bytes(128);
  *tps->add_ops() = ag;
  *tps->add_ops() = make_record(1);

  ir::Stream* dps = cls->add_streams();
  dps->set_name("dp");
  dps->set_kind(ir::DP_COMM);
  ir::Op rs;
  rs.set_phase(ir::DP_SYNC);
  rs.mutable_collective()->set_kind(ir::REDUCE_SCATTER);
  rs.mutable_collective()->set_group_slot(1);
  rs.mutable_collective()->set_bytes(256);
  *dps->add_ops() = rs;

  ir::Stream* send = cls->add_streams();
  send->set_name("pp_send");
  send->set_kind(ir::PP_SEND);
  ir::Op s;
  s.set_microbatch(0);
  s.mutable_send()->set_peer_slot(1);
  s.mutable_send()->set_bytes(64);
  *send->add_ops() = s;

  for (int r = 0; r < 2; ++r) {
    ir::RankBinding* b = p.add_ranks();
    b->set_class_id(0);
    b->add_group(r);
    b->add_group(-1);
    b->add_peer(r == 1 ? 0 : -1);
    b->add_peer(r == 0 ? 1 : -1);
    b->mutable_coord()->set_pp(r);
  }
  return p;
}

inline engine::OpSpan span(const ir::Program& p, int rank, int stream, int op, int64_t ready, int64_t start,
                           int64_t end) {
  engine::OpSpan s;
  s.rank = rank;
  s.stream = stream;
  s.op = op;
  s.ir = &p.classes(0).streams(stream).ops(op);
  s.ready = TimeNs(ready);
  s.issued = s.ready;  // the host was not late
  s.start = TimeNs(start);
  s.end = TimeNs(end);
  return s;
}

// The same, issued by its host only at `issued` (ready <= issued <= start).
inline engine::OpSpan span(const ir::Program& p, int rank, int stream, int op, int64_t ready, int64_t issued,
                           int64_t start, int64_t end) {
  engine::OpSpan s = span(p, rank, stream, op, ready, start, end);
  s.issued = TimeNs(issued);
  return s;
}

inline engine::WaitCause cause(int stream, int op, int64_t start, int64_t end) {
  engine::WaitCause c;
  c.valid = true;
  c.stream = stream;
  c.op = op;
  c.start = TimeNs(start);
  c.end = TimeNs(end);
  return c;
}

// Rank 1's compute stream, by construction (ns):
//   wait  [0,100]   recv [60,100]  → warm-up 60, pp_exposed 40
//   F     [100,150]                → busy 50, memory 1800 → 2100
//   wait  [150,170] AG tp [140,170] → tp_exposed 20 (cause began before the wait)
//   wait  [170,230] recv [210,230] → pp_other 40, pp_exposed 20
//   B     [230,300]                → busy 70, memory back to 1800
//   wait  [300,350] recv [340,350] → cool-down 40 (no backward follows), pp_exposed 10
//   opt   [350,380]                → busy 30
//   end of iteration 400           → cool-down 20
// Rank 0: F [0,100] (busy 100); send [100,120] on its own stream; a wait
// [120,130] on an already-recorded event (no cause) reached only at 120, so
// [100,130] is a stall → pp_other 30 once B [130,150] follows; opt [150,200];
// cool-down 200. The DP reduce-scatter [300,390] is waited on by nobody.
inline void replay(const ir::Program& p, const std::vector<engine::Observer*>& observers, bool fold = false) {
  engine::RunInfo info;
  info.program = &p;
  if (fold) {
    info.simulated_ranks = {1};
    info.represents = {{0, 1}};
  } else {
    info.simulated_ranks = {0, 1};
    info.represents = {{0}, {1}};
  }
  for (auto* o : observers) o->on_run_begin(info);
  auto end = [&](const engine::OpSpan& s) {
    for (auto* o : observers) o->on_op_end(s);
  };
  auto wait = [&](const engine::OpSpan& s, const engine::WaitCause& c) {
    for (auto* o : observers) o->on_op_end(s);
    for (auto* o : observers) o->on_wait_end(s, c);
  };
  if (!fold) {
    end(span(p, 0, kCompute, 1, 0, 0, 100));
    end(span(p, 0, kSend, 0, 100, 100, 120));
    engine::WaitCause none;  // already recorded
    wait(span(p, 0, kCompute, 3, 120, 120, 130), none);
    end(span(p, 0, kCompute, 4, 130, 130, 150));
    end(span(p, 0, kCompute, 6, 150, 150, 200));
  }
  wait(span(p, 1, kCompute, 0, 0, 0, 100), cause(kRecv, 0, 60, 100));
  engine::OpSpan recv0 = span(p, 1, kRecv, 0, 0, 60, 100);
  end(recv0);
  if (!fold) {
    for (auto* o : observers) o->on_transfer(span(p, 0, kSend, 0, 100, 100, 120), recv0);
  }
  end(span(p, 1, kCompute, 1, 100, 100, 150));
  end(span(p, 1, kTp, 0, 140, 140, 170));
  wait(span(p, 1, kCompute, 2, 150, 150, 170), cause(kTp, 0, 140, 170));
  wait(span(p, 1, kCompute, 3, 170, 170, 230), cause(kRecv, 2, 210, 230));
  end(span(p, 1, kCompute, 4, 230, 230, 300));
  wait(span(p, 1, kCompute, 5, 300, 300, 350), cause(kRecv, 4, 340, 350));
  end(span(p, 1, kCompute, 6, 350, 350, 380));
  if (!fold) end(span(p, 0, kDp, 0, 200, 300, 390));
  for (auto* o : observers) o->on_run_end(TimeNs(400));
}

}  // namespace lacuna::report::testing
