// Multimodal scenarios for the heterogeneous-placement tests, filled in code:
// the compiler tests' small LLM plus ViT-style encoders with their layouts,
// and helpers that read programs back (sends resolved to global ranks, ops
// per module).
#pragma once

#include <cstdint>
#include <string>
#include <tuple>
#include <vector>

#include "sim/compiler/compiler_test_support.h"
#include "sim/proto/program.pb.h"
#include "sim/scenario/scenario.h"

namespace lacuna::placement::testing {

// The compiler tests' small encoder (2 layers, 8 heads here) with a layout.
struct EncoderSpec : compiler::testing::SmallEncoder {
  EncoderSpec() {
    layers = 2;
    heads = 8;
  }
  // Layout.
  int64_t tp = 1, cp = 1, pp = 1, dp = 8, first_rank = 0;
  bool sp = false;
  scenario::Recompute recompute = scenario::RECOMPUTE_NONE;
  std::string rank_order;
};

inline int64_t island_ranks(const std::vector<EncoderSpec>& encoders, int64_t llm_world) {
  int64_t total = llm_world;
  for (const auto& e : encoders)
    if (e.first_rank > 0) total += e.tp * e.cp * e.pp * e.dp;
  return total;
}

inline scenario::LoadedScenario make_mllm(const compiler::testing::Small& llm, const std::vector<EncoderSpec>& encoders,
                                          bool offload = false, double host_link_gb_per_s = 0) {
  scenario::LoadedScenario ls = compiler::testing::make_scenario(llm);
  auto& spec = ls.spec;
  spec.set_name("small-mllm");
  const int64_t world = llm.tp * llm.cp * llm.pp * llm.dp;
  const int64_t total = island_ranks(encoders, world);
  spec.mutable_cluster()->set_num_nodes((total + llm.gpus_per_node - 1) / llm.gpus_per_node);
  int i = 0;
  for (const auto& e : encoders) {
    compiler::testing::SmallEncoder named = e;
    named.name = "vit" + std::to_string(i++);
    auto* enc = compiler::testing::add_small_encoder(spec, named);
    auto* l = enc->mutable_layout();
    l->set_tp(e.tp);
    l->set_cp(e.cp);
    l->set_pp(e.pp);
    l->set_dp(e.dp);
    l->set_virtual_stages(1);
    l->set_first_rank(e.first_rank);
    l->set_sequence_parallel(e.sp);
    l->set_recompute(e.recompute);
    l->set_rank_order(e.rank_order);
  }
  spec.mutable_placement()->set_kind(scenario::HETEROGENEOUS);
  spec.mutable_placement()->mutable_heterogeneous()->set_offload_encoder(offload);
  spec.mutable_placement()->mutable_heterogeneous()->set_host_link_gb_per_s(host_link_gb_per_s);
  return ls;
}

// A send as the program resolves it.
struct ResolvedSend {
  int32_t src = 0, dst = 0, channel = 0;
  int64_t tag = 0, bytes = 0;
  int32_t module = 0;
  auto key() const { return std::tuple(src, dst, channel, tag, bytes, module); }
  bool operator<(const ResolvedSend& o) const { return key() < o.key(); }
  bool operator==(const ResolvedSend& o) const { return key() == o.key(); }
};

// Every send (is_send) or receive of every rank, on streams of `kind`, with
// the peer slot resolved through the rank's binding (for a receive, src is
// the peer and dst the rank itself).
inline std::vector<ResolvedSend> resolve_p2p(const ir::Program& p, ir::StreamKind kind, bool is_send) {
  std::vector<ResolvedSend> out;
  for (int32_t r = 0; r < p.ranks_size(); ++r) {
    const auto& b = p.ranks(r);
    for (const auto& s : p.classes(b.class_id()).streams()) {
      if (s.kind() != kind) continue;
      for (const auto& op : s.ops()) {
        if (is_send && op.has_send())
          out.push_back(
              {r, b.peer(op.send().peer_slot()), op.send().channel(), op.send().tag(), op.send().bytes(), op.module()});
        if (!is_send && op.has_recv())
          out.push_back(
              {b.peer(op.recv().peer_slot()), r, op.recv().channel(), op.recv().tag(), op.recv().bytes(), op.module()});
      }
    }
  }
  return out;
}

inline int64_t ops_of_module_above_zero(const ir::Program& p) {
  int64_t n = 0;
  for (const auto& c : p.classes())
    for (const auto& s : c.streams())
      for (const auto& op : s.ops()) n += op.module() > 0;
  return n;
}

using compiler::testing::make_encoder_work_free;

}  // namespace lacuna::placement::testing
