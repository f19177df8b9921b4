// Test-only: two_rank_program turned into a small multimodal program (an
// Optimus-placed "vit-22b" encoder next to the LLM), with boundary, encoder
// communication, a second compute stream and a stream of unknown kind, and a
// scripted replay of rank 0 whose attribution is known by construction.
#pragma once

#include <vector>

#include "sim/report/observers/test_fixture.h"

namespace lacuna::report::testing {

// Streams added to the class of two_rank_program.
inline constexpr int kBoundary = 5, kEncComm = 6, kEncCompute = 7, kOdd = 8;

inline ir::Op with_module(ir::Op op, int module) {
  op.set_module(module);
  return op;
}

// Compute stream (after two_rank_program's ops 0..6):
//   7 wait (boundary)  8 vit F mb2 L3 fc1  9 wait (encoder TP)  10 vit B mb2 L3 fc1
//   11 wait (a collective on a stream and group of unknown kind)
inline ir::Program multimodal_program() {
  ir::Program p = two_rank_program();
  ir::ProgramInfo* info = p.mutable_info();
  info->set_scenario_name("tiny mllm");
  info->set_placement(scenario::OPTIMUS);
  ir::ModuleInfo* llm = info->add_modules();
  llm->set_name("gpt-tiny");
  llm->set_tp(1);
  llm->set_cp(1);
  llm->set_pp(2);
  llm->set_dp(1);
  llm->set_virtual_stages(1);
  llm->set_first_rank(0);
  llm->set_num_ranks(2);
  llm->set_parameters(1'500'000'000);
  llm->set_model_flops_per_iteration(6e6);
  ir::ModuleInfo* vit = info->add_modules();
  vit->set_name("vit-22b");
  vit->set_is_encoder(true);
  vit->set_tp(1);
  vit->set_cp(1);
  vit->set_pp(1);
  vit->set_dp(2);
  vit->set_virtual_stages(1);
  vit->set_first_rank(0);
  vit->set_num_ranks(2);
  vit->set_parameters(22'000'000'000);
  vit->set_model_flops_per_iteration(2e6);
  vit->set_frozen(true);
  ir::OptimusInfo* o = info->mutable_optimus();
  o->set_encoder_tp(1);
  o->set_encoder_pp(1);
  o->set_encoder_dp(2);
  o->set_encoder_pipelines_per_llm_pipeline(2);
  o->add_microbatch_split(3);
  o->add_microbatch_split(5);
  o->set_llm_only_iteration_ns(300);
  o->set_estimated_iteration_ns(340);
  o->set_coarse_efficiency(0.25);
  o->set_fine_efficiency(0.75);
  o->set_plans_evaluated(12);
  o->set_plans_pruned_by_memory(4);
  o->set_splits_evaluated(70);

  ir::Slot* enc_tp = p.add_group_slots();  // slot 2
  enc_tp->set_name("enc_tp");
  enc_tp->set_kind(ir::ENCODER_TP);
  ir::Slot* weird = p.add_group_slots();  // slot 3: a kind this build does not know
  weird->set_name("weird");
  weird->set_kind(static_cast<ir::GroupKind>(77));
  for (ir::RankBinding& b : *p.mutable_ranks()) {
    b.add_group(-1);
    b.add_group(-1);
  }

  ir::RankClass* cls = p.mutable_classes(0);
  cls->set_num_events(3);
  ir::Stream* compute = cls->mutable_streams(kCompute);
  *compute->add_ops() = make_wait(0, 4);
  *compute->add_ops() = with_module(make_compute(ir::FORWARD, 2, 3, ir::ROLE_FC1), 1);
  *compute->add_ops() = make_wait(1, 2);
  *compute->add_ops() = with_module(make_compute(ir::BACKWARD_INPUT, 2, 3, ir::ROLE_FC1), 1);
  *compute->add_ops() = make_wait(2, 1);

  ir::Stream* boundary = cls->add_streams();
  boundary->set_name("boundary");
  boundary->set_kind(ir::BOUNDARY);
  ir::Op recv;
  recv.set_microbatch(2);
  recv.set_module(1);
  recv.mutable_recv()->set_peer_slot(0);
  recv.mutable_recv()->set_bytes(4096);
  *boundary->add_ops() = recv;
  *boundary->add_ops() = make_record(0);

  ir::Stream* enc = cls->add_streams();
  enc->set_name("enc_tp");
  enc->set_kind(ir::ENCODER_COMM);
  ir::Op ar;
  ar.set_phase(ir::FORWARD);
  ar.set_module(1);
  ar.mutable_collective()->set_kind(ir::ALL_REDUCE);
  ar.mutable_collective()->set_group_slot(2);
  ar.mutable_collective()->set_bytes(512);
  *enc->add_ops() = ar;
  *enc->add_ops() = make_record(1);

  ir::Stream* enc_compute = cls->add_streams();
  enc_compute->set_name("enc_compute");
  enc_compute->set_kind(ir::COMPUTE);
  *enc_compute->add_ops() = with_module(make_compute(ir::FORWARD, 3, 0, ir::ROLE_QKV), 1);

  ir::Stream* odd = cls->add_streams();
  odd->set_name("odd");
  odd->set_kind(static_cast<ir::StreamKind>(42));
  ir::Op coll;
  coll.mutable_collective()->set_kind(ir::ALL_GATHER);
  coll.mutable_collective()->set_group_slot(3);
  coll.mutable_collective()->set_bytes(64);
  *odd->add_ops() = coll;
  *odd->add_ops() = make_record(2);
  ir::Op send;
  send.mutable_send()->set_peer_slot(1);
  send.mutable_send()->set_bytes(64);
  *odd->add_ops() = send;
  return p;
}

// Rank 0 alone (ns):
//   F            [0,100]    busy 100
//   wait         [100,150]  boundary recv starts 120 → stall 20 (→ pp_other), boundary exposed 30
//   vit F        [150,200]  busy 50, encoder compute 50
//   wait         [200,260]  encoder AR [200,260] → encoder comm exposed 60
//   vit B        [260,300]  busy 40, encoder compute 40 (a backward: the stall above is pp_other)
//   enc_compute  [0,40]     on the second compute stream: encoder compute 40, not busy
//   wait         [300,330]  AG of unknown kinds [300,330] → DP exposed 30 (the fallback)
//   end 350                 cool-down 20
// busy 190 + idle 160 = 350; encoder compute 130.
inline void replay_multimodal(const ir::Program& p, const std::vector<engine::Observer*>& observers) {
  engine::RunInfo info;
  info.program = &p;
  info.simulated_ranks = {0};
  info.represents = {{0, 1}};
  for (auto* o : observers) o->on_run_begin(info);
  auto end = [&](const engine::OpSpan& s) {
    for (auto* o : observers) o->on_op_end(s);
  };
  auto wait = [&](const engine::OpSpan& s, const engine::WaitCause& c) {
    for (auto* o : observers) o->on_op_end(s);
    for (auto* o : observers) o->on_wait_end(s, c);
  };
  end(span(p, 0, kEncCompute, 0, 0, 0, 40));
  end(span(p, 0, kCompute, 1, 0, 0, 100));
  end(span(p, 0, kBoundary, 0, 100, 120, 150));
  wait(span(p, 0, kCompute, 7, 100, 100, 150), cause(kBoundary, 0, 120, 150));
  end(span(p, 0, kCompute, 8, 150, 150, 200));
  end(span(p, 0, kEncComm, 0, 200, 200, 260));
  wait(span(p, 0, kCompute, 9, 200, 200, 260), cause(kEncComm, 0, 200, 260));
  end(span(p, 0, kCompute, 10, 260, 260, 300));
  end(span(p, 0, kOdd, 0, 300, 300, 330));
  wait(span(p, 0, kCompute, 11, 300, 300, 330), cause(kOdd, 0, 300, 330));
  end(span(p, 0, kOdd, 2, 330, 330, 340));
  for (auto* o : observers) o->on_run_end(TimeNs(350));
}

}  // namespace lacuna::report::testing
