// Scenarios for the compiler tests, filled in code (no presets, no files).
#pragma once

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include <google/protobuf/util/message_differencer.h>
#include <gtest/gtest.h>

#include "sim/compiler/compile.h"
#include "sim/cost/cost_model.h"
#include "sim/proto/program.pb.h"
#include "sim/scenario/scenario.h"

namespace lacuna::compiler::testing {

struct Small {
  int64_t layers = 4, hidden = 256, heads = 8, kv_heads = 8, ffn = 1024, vocab = 1024, seq = 128;
  int64_t tp = 2, cp = 1, pp = 2, dp = 2, v = 1;
  bool sp = false, parallel_attn = false, distributed_optimizer = true, overlap_grad = true, overlap_param = true;
  int64_t global_batch = 16, micro_batch = 2;
  scenario::ScheduleKind schedule = scenario::ONE_F_ONE_B;
  scenario::Recompute recompute = scenario::RECOMPUTE_NONE;
  bool unfused_attention = false;
  double hidden_dropout = 0, attention_dropout = 0;
  std::string rank_order;
  int64_t gpus_per_node = 8;
  // The software's switches (unset: Megatron-core 0.12's defaults).
  scenario::Execution execution;
};

// Small with sequence parallelism and GEMMs wide enough for FP8's casts and
// amax reductions to show (the FP8 tests' model).
inline Small sp_small() {
  Small s;
  s.sp = true;
  s.hidden = 1024;
  s.ffn = 4096;
  s.heads = 16;
  s.kv_heads = 16;
  s.seq = 1024;
  return s;
}

inline scenario::Cluster test_cluster(int64_t nodes, int64_t gpus_per_node) {
  scenario::Cluster c;
  auto* gpu = c.mutable_gpu();
  gpu->set_name("test-gpu");
  gpu->set_peak_bf16_tflops(989);
  gpu->set_peak_fp16_tflops(989);
  gpu->set_hbm_bandwidth_gb_per_s(3350);
  gpu->set_hbm_capacity_gib(80);
  gpu->set_num_sms(132);
  // H100 figures as in sim/cost/test_clusters.h (achieved / peak).
  auto set_eff = [&](const char* key, double flops, double memory) {
    scenario::Efficiency e;
    e.set_flops(flops);
    e.set_memory(memory);
    (*gpu->mutable_efficiency())[key] = e;
  };
  set_eff("GEMM", 0.8, 0.85);
  set_eff("ATTENTION", 0.6, 0.8);
  set_eff("DEFAULT", 0.5, 0.7);
  gpu->set_kernel_overhead_us(3);
  // The compiler's tests check structure against closed forms: no per-shape
  // efficiency, no host costs, no memory overheads.
  gpu->mutable_shape_model()->set_flat(true);
  auto* host = c.mutable_host();
  host->set_kernel_launch_us(0);
  host->set_collective_launch_us(0);
  host->set_microbatch_overhead_us(0);
  host->set_iteration_overhead_us(0);
  auto* mo = c.mutable_memory_overheads();
  mo->set_cuda_context_gib(0);
  mo->set_nccl_communicator_mib(0);
  mo->set_allocator_fragmentation(0);
  c.set_num_nodes(nodes);
  c.set_gpus_per_node(gpus_per_node);
  c.mutable_nvlink()->set_bandwidth_gb_per_s(450);
  c.mutable_nvlink()->set_latency_us(0.6);
  c.mutable_nvlink()->set_efficiency(0.82);
  c.set_nvls(false);
  c.mutable_nic()->set_bandwidth_gb_per_s(50);
  c.mutable_nic()->set_latency_us(2.7);
  c.mutable_nic()->set_efficiency(0.95);
  c.set_nics_per_node(8);
  c.set_topology(scenario::RAIL_OPTIMIZED);
  return c;
}

inline scenario::LoadedScenario make_scenario(const Small& s) {
  scenario::LoadedScenario ls;
  auto& spec = ls.spec;
  spec.set_name("small");
  auto* llm = spec.mutable_model()->mutable_llm();
  llm->set_name("gpt-small");
  llm->set_num_layers(s.layers);
  llm->set_hidden_size(s.hidden);
  llm->set_num_attention_heads(s.heads);
  llm->set_num_kv_heads(s.kv_heads);
  llm->set_ffn_hidden_size(s.ffn);
  llm->set_activation(scenario::GELU);
  llm->set_norm(scenario::LAYERNORM);
  llm->set_vocab_size(s.vocab);
  llm->set_seq_length(s.seq);
  llm->set_parallel_attention_mlp(s.parallel_attn);
  llm->set_linear_bias(true);
  llm->set_position_embedding(scenario::Transformer::POSITION_LEARNED);
  if (s.unfused_attention) llm->set_attention_kernel(scenario::Transformer::ATTENTION_UNFUSED);
  llm->set_hidden_dropout(s.hidden_dropout);
  llm->set_attention_dropout(s.attention_dropout);
  const int64_t world = s.tp * s.cp * s.pp * s.dp;
  *spec.mutable_cluster() = test_cluster((world + s.gpus_per_node - 1) / s.gpus_per_node, s.gpus_per_node);
  auto* par = spec.mutable_parallel();
  par->set_tp(s.tp);
  par->set_sequence_parallel(s.sp);
  par->set_cp(s.cp);
  par->set_pp(s.pp);
  par->set_dp(s.dp);
  par->set_virtual_stages(s.v);
  par->set_distributed_optimizer(s.distributed_optimizer);
  par->set_recompute(s.recompute);
  par->set_rank_order(s.rank_order);
  par->set_overlap_grad_reduce(s.overlap_grad);
  par->set_overlap_param_gather(s.overlap_param);
  spec.mutable_schedule()->set_kind(s.schedule);
  spec.mutable_training()->set_global_batch(s.global_batch);
  spec.mutable_training()->set_micro_batch(s.micro_batch);
  spec.mutable_training()->set_precision(scenario::BF16);
  *spec.mutable_execution() = s.execution;
  ls.path = "test.pbtxt";
  return ls;
}

// GPT-3 175B on 3,072 H100s: TP 8 + SP, PP 8 × 12 virtual stages, DP 48,
// global batch 1536, micro-batch 2, distributed optimizer with overlap.
inline Small gpt3_3072() {
  Small s;
  s.layers = 96;
  s.hidden = 12288;
  s.heads = 96;
  s.kv_heads = 96;
  s.ffn = 4 * 12288;
  s.vocab = 51200;
  s.seq = 2048;
  s.tp = 8;
  s.sp = true;
  s.pp = 8;
  s.dp = 48;
  s.v = 12;
  s.global_batch = 1536;
  s.micro_batch = 2;
  s.schedule = scenario::INTERLEAVED_1F1B;
  s.recompute = scenario::RECOMPUTE_SELECTIVE;
  return s;
}

// A small ViT-style encoder for multimodal compiler tests (Megatron
// placements: no layout of its own).
struct SmallEncoder {
  int64_t layers = 4, hidden = 128, heads = 4, ffn = 512;
  int64_t tokens_per_image = 64, images_per_sample = 1;
  int64_t token_merge = 1, projector_layers = 2;
  bool frozen = false;
  std::string name = "vit-small";
};

// Appends `e` to the scenario's encoders: a ViT-style bidirectional
// transformer with learned positions, its projector and data mix (no layout).
inline scenario::Encoder* add_small_encoder(scenario::Scenario& spec, const SmallEncoder& e) {
  auto* enc = spec.mutable_model()->add_encoders();
  auto* t = enc->mutable_transformer();
  t->set_name(e.name);
  t->set_num_layers(e.layers);
  t->set_hidden_size(e.hidden);
  t->set_num_attention_heads(e.heads);
  t->set_num_kv_heads(e.heads);
  t->set_ffn_hidden_size(e.ffn);
  t->set_activation(scenario::GELU);
  t->set_norm(scenario::LAYERNORM);
  t->set_seq_length(e.tokens_per_image);
  t->set_bidirectional_attention(true);
  t->set_linear_bias(true);
  t->set_position_embedding(scenario::Transformer::POSITION_LEARNED);
  enc->set_frozen(e.frozen);
  enc->set_images_per_sample(e.images_per_sample);
  enc->mutable_projector()->set_token_merge(e.token_merge);
  enc->mutable_projector()->set_num_layers(e.projector_layers);
  return enc;
}

// `s` (the LLM and its plan) with `encoders` under `placement`
// (balanced_virtual_stages 0: parallel.virtual_stages).
inline scenario::LoadedScenario make_mllm_scenario(const Small& s, const std::vector<SmallEncoder>& encoders,
                                                   scenario::PlacementKind placement,
                                                   int64_t balanced_virtual_stages = 0) {
  scenario::LoadedScenario ls = make_scenario(s);
  ls.spec.set_name("small-mllm");
  for (const SmallEncoder& e : encoders) add_small_encoder(ls.spec, e);
  ls.spec.mutable_placement()->set_kind(placement);
  ls.spec.mutable_placement()->set_balanced_virtual_stages(balanced_virtual_stages);
  return ls;
}

// Durations that depend on the op only (deterministic), so every transfer
// and collective has a cost and compute follows its FLOPs.
class TrivialCost : public cost::CostModel {
 public:
  std::string_view name() const override { return "trivial"; }
  TimeNs compute(const ir::Compute& op) const override {
    return TimeNs(1000 + static_cast<int64_t>(op.flops() / 1e9 + op.bytes() / 1e6));
  }
  TimeNs collective(ir::CollectiveKind, int64_t bytes, const cost::GroupShape& g) const override {
    return TimeNs(500 + bytes / 1000 + 10 * g.size);
  }
  TimeNs p2p(int64_t bytes, bool same_node) const override { return TimeNs((same_node ? 200 : 800) + bytes / 1000); }
};

inline int64_t total_ops(const ir::RankClass& c) {
  int64_t n = 0;
  for (const auto& s : c.streams()) n += s.ops_size();
  return n;
}

inline const ir::Stream* find_stream(const ir::RankClass& c, const std::string& name) {
  for (const auto& s : c.streams())
    if (s.name() == name) return &s;
  return nullptr;
}

// Every op of modules > 0 (encoders and their projectors) that takes time —
// compute, collective, send — lasts exactly 1 ns, so the encoder work is
// almost free and each such op adds at most 1 ns on any path; returns how many
// ops that is (the bound the zero-encoder-work tests allow).
inline int64_t make_encoder_work_free(ir::Program& p) {
  int64_t ops = 0;
  for (auto& c : *p.mutable_classes())
    for (auto& s : *c.mutable_streams())
      for (auto& op : *s.mutable_ops()) {
        if (op.module() == 0) continue;
        ++ops;
        if (op.has_compute()) op.mutable_compute()->set_fixed_duration_ns(1);
        if (op.has_collective()) op.mutable_collective()->set_fixed_duration_ns(1);
        if (op.has_send()) op.mutable_send()->set_fixed_duration_ns(1);
      }
  return ops;
}

// Schedule files of one test, in a temporary folder named after it and
// removed with the object.
class ScheduleFiles {
 public:
  ScheduleFiles()
      : dir_(std::filesystem::temp_directory_path() /
             ("lacuna-" + std::to_string(::testing::UnitTest::GetInstance()->random_seed()) + "-" +
              ::testing::UnitTest::GetInstance()->current_test_info()->test_suite_name() + "-" +
              ::testing::UnitTest::GetInstance()->current_test_info()->name())) {
    std::filesystem::create_directories(dir_);
  }
  ~ScheduleFiles() {
    std::error_code ignored;
    std::filesystem::remove_all(dir_, ignored);
  }
  ScheduleFiles(const ScheduleFiles&) = delete;
  ScheduleFiles& operator=(const ScheduleFiles&) = delete;

  // `text` written as `name`, and the scenario `s` running it as its CUSTOM
  // schedule (schedule.actions_file).
  scenario::LoadedScenario scenario(const Small& s, const std::string& text, const std::string& name) const {
    std::ofstream(dir_ / name) << text;
    scenario::LoadedScenario ls = make_scenario(s);
    ls.path = (dir_ / "test.pbtxt").string();
    ls.spec.mutable_schedule()->set_kind(scenario::CUSTOM);
    ls.spec.mutable_schedule()->set_actions_file(name);
    return ls;
  }

 private:
  std::filesystem::path dir_;
};

// Two messages (programs, classes) that should be equal; the differences,
// when any, are printed (MessageDifferencer: SerializeAsString is not stable
// for map fields).
inline void expect_same_message(const google::protobuf::Message& a, const google::protobuf::Message& b) {
  std::string diff;
  google::protobuf::util::MessageDifferencer d;
  d.ReportDifferencesToString(&diff);
  EXPECT_TRUE(d.Compare(a, b)) << diff.substr(0, 2000);
}

// Two programs compiled from schedule files that should give the same
// program: equal but for the scenario file's name.
inline void expect_same_program(ir::Program a, ir::Program b) {
  a.mutable_info()->clear_scenario_file();
  b.mutable_info()->clear_scenario_file();
  expect_same_message(a, b);
}

}  // namespace lacuna::compiler::testing
