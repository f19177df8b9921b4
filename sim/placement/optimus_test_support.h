// Multimodal scenarios for the Optimus tests, filled in code: the compiler
// tests' small LLM plus small ViT-style encoders.
#pragma once

#include <string>

#include "sim/compiler/compiler_test_support.h"
#include "sim/scenario/scenario.h"

namespace lacuna::placement::optimus::testing {

struct SmallEncoder {
  int64_t layers = 4, hidden = 128, heads = 4, ffn = 512, tokens_per_image = 64;
  int64_t images = 2, token_merge = 4, projector_layers = 2;
  bool frozen = false;
  bool parallel_attn = false;
};

struct SmallMllm {
  compiler::testing::Small llm;
  std::vector<SmallEncoder> encoders{SmallEncoder{}};
  scenario::PlacementKind placement = scenario::OPTIMUS;
  bool coarse_only = false;
  int64_t max_splits = 0;
  // The execution mechanisms the bubble scheduler's estimate models: true
  // runs the pipeline p2p overlapped (the scheduler assumes sends that never
  // block compute) and turns off the gradient-norm and step-statistics
  // all-reduces read on the host (they synchronize every rank at the step).
  bool scheduler_semantics = true;
};

inline scenario::LoadedScenario make_mllm(const SmallMllm& m) {
  scenario::LoadedScenario ls = compiler::testing::make_scenario(m.llm);
  auto& spec = ls.spec;
  spec.set_name("small-mllm");
  for (size_t i = 0; i < m.encoders.size(); ++i) {
    const SmallEncoder& e = m.encoders[i];
    compiler::testing::SmallEncoder small;
    small.name = "vit-" + std::to_string(i);
    small.layers = e.layers;
    small.hidden = e.hidden;
    small.heads = e.heads;
    small.ffn = e.ffn;
    small.tokens_per_image = e.tokens_per_image;
    small.images_per_sample = e.images;
    small.token_merge = e.token_merge;
    small.projector_layers = e.projector_layers;
    small.frozen = e.frozen;
    compiler::testing::add_small_encoder(spec, small)->mutable_transformer()->set_parallel_attention_mlp(
        e.parallel_attn);
  }
  if (m.scheduler_semantics) {
    auto* x = spec.mutable_execution();
    x->set_pipeline_p2p(scenario::P2P_OVERLAPPED);
    x->set_step_stats_sync(false);
    x->set_clip_grad(0);
  }
  spec.mutable_placement()->set_kind(m.placement);
  spec.mutable_placement()->mutable_optimus()->set_coarse_only(m.coarse_only);
  spec.mutable_placement()->mutable_optimus()->set_max_splits_per_plan(m.max_splits);
  return ls;
}

}  // namespace lacuna::placement::optimus::testing
