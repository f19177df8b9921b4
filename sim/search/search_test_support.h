// Small scenarios for the search tests: the shipped GPT 1.3B scenario with a
// random model and batch, reset to a plan every shape accepts (tp 1, no
// pipeline, all GPUs data-parallel) so that validate_scenario passes.
#pragma once

#include <algorithm>
#include <random>
#include <string>

#include "sim/scenario/scenario.h"

namespace lacuna::search::testing {

inline scenario::LoadedScenario gpt_small() {
  return scenario::load_scenario(std::string(LACUNA_SOURCE_DIR) + "/scenarios/llm/gpt-1.3b-8gpu.pbtxt");
}

// A random small model on 1 or 2 nodes; validated.
inline scenario::LoadedScenario random_small(std::mt19937_64& rng) {
  scenario::LoadedScenario s = gpt_small();
  auto pick = [&](std::initializer_list<int64_t> xs) { return *(xs.begin() + rng() % xs.size()); };
  auto* m = s.spec.mutable_model()->mutable_llm();
  const int64_t heads = pick({4, 6, 8, 12, 16});
  m->set_num_layers(pick({2, 3, 4, 6, 8, 12}));
  m->set_num_attention_heads(heads);
  m->set_num_kv_heads(pick({1, 2}) == 1 ? heads : heads / 2);
  m->set_hidden_size(heads * 64);
  m->set_ffn_hidden_size(heads * 64 * pick({3, 4}));
  m->set_seq_length(pick({128, 192, 256, 512}));
  m->set_vocab_size(pick({1024, 4096}));
  const int64_t nodes = pick({1, 2});
  s.spec.mutable_cluster()->set_num_nodes(nodes);
  auto* p = s.spec.mutable_parallel();
  p->set_tp(1);
  p->set_sequence_parallel(false);
  p->set_cp(1);
  p->set_pp(1);
  p->set_virtual_stages(1);
  p->set_dp(nodes * s.spec.cluster().gpus_per_node());
  p->set_distributed_optimizer(false);
  p->set_overlap_grad_reduce(false);
  p->set_overlap_param_gather(false);
  s.spec.mutable_schedule()->set_kind(scenario::ONE_F_ONE_B);
  s.spec.mutable_training()->set_global_batch(p->dp() * pick({1, 2, 3, 4}));
  s.spec.mutable_training()->set_micro_batch(1);
  scenario::validate_scenario(s.spec, s.locations);
  return s;
}

// random_small with mixture-of-experts MLPs (docs/moe.md): random experts,
// top-k, expert and shared-expert widths, first dense layers, capacity,
// dispatcher and routing; no EP yet (ep is the search's). Validated.
inline scenario::LoadedScenario random_small_moe(std::mt19937_64& rng) {
  scenario::LoadedScenario s = random_small(rng);
  auto pick = [&](std::initializer_list<int64_t> xs) { return *(xs.begin() + rng() % xs.size()); };
  auto* llm = s.spec.mutable_model()->mutable_llm();
  scenario::Moe* m = llm->mutable_moe();
  m->set_num_experts(pick({2, 4, 6, 8, 16}));
  m->set_top_k(std::min<int64_t>(m->num_experts(), pick({1, 2, 4})));
  m->set_expert_ffn_hidden_size(pick({0, 0, 90, 100, 128, 192}));
  m->set_shared_expert_ffn_hidden_size(pick({0, 0, 128, 256}));
  m->set_first_dense_layers(pick({0, 0, 1}));
  m->set_dispatcher(static_cast<scenario::MoeDispatcher>(pick({1, 2, 3})));
  if (pick({0, 1}) == 1) m->set_capacity_factor(1.25);
  if (pick({0, 1}) == 1) {
    m->mutable_routing()->set_distribution(scenario::ROUTING_DIRICHLET_MULTINOMIAL);
    m->mutable_routing()->set_dirichlet_alpha(1.0);
  }
  scenario::validate_scenario(s.spec, s.locations);
  return s;
}

// random_small trained in FP8 (docs/fp8.md): a random recipe of the Hopper
// ones, delayed scaling's amax group over tp × cp × dp or tp × cp, FP8
// parameter gather or not. Validated.
inline scenario::LoadedScenario random_small_fp8(std::mt19937_64& rng) {
  scenario::LoadedScenario s = random_small(rng);
  auto pick = [&](std::initializer_list<int64_t> xs) { return *(xs.begin() + rng() % xs.size()); };
  s.spec.mutable_cluster()->mutable_gpu()->set_peak_fp8_tflops(1979);
  auto* t = s.spec.mutable_training();
  t->set_precision(scenario::FP8);
  auto* f = t->mutable_fp8();
  f->set_recipe(static_cast<scenario::Fp8Recipe>(
      pick({scenario::FP8_DELAYED, scenario::FP8_DELAYED, scenario::FP8_CURRENT, scenario::FP8_BLOCKWISE})));
  if (f->recipe() == scenario::FP8_DELAYED && pick({0, 1}) == 1) f->set_tp_only_amax_reduction(true);
  scenario::validate_scenario(s.spec, s.locations);
  return s;
}

}  // namespace lacuna::search::testing
