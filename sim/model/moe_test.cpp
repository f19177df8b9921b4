// The MoE MLP against closed forms (docs/moe.md): dispatch bytes, capacity,
// the hierarchical inter-domain volume, the layer pattern, parameters, and a
// 1-expert top-1 MoE layer equal to the dense layer.
#include "sim/model/moe.h"

#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <variant>

#include "sim/model/accounting.h"

namespace lacuna::model {
namespace {

LayerShape base_shape() {
  LayerShape s;
  s.micro_batch = 2;
  s.seq_length = 512;
  s.hidden = 256;
  s.heads = 8;
  s.kv_heads = 8;
  s.ffn_hidden = 1024;
  s.vocab = 1024;
  s.activation = scenario::SWIGLU;
  s.norm = scenario::RMSNORM;
  s.tp = 2;
  s.sequence_parallel = true;
  return s;
}

LayerShape moe_shape(int64_t experts, int64_t top_k, int64_t ep, int64_t etp,
                     scenario::MoeDispatcher dispatcher = scenario::DISPATCHER_ALLTOALL) {
  LayerShape s = base_shape();
  s.moe.num_experts = experts;
  s.moe.top_k = top_k;
  s.moe.expert_ffn = 512;
  s.moe.ep = ep;
  s.moe.expert_tp = etp;
  s.moe.ep_per_domain = ep;
  s.moe.dispatcher = dispatcher;
  s.moe_layer = true;
  return s;
}

std::vector<CommPoint> comms(const std::vector<Step>& steps) {
  std::vector<CommPoint> out;
  for (const Step& st : steps)
    if (const auto* c = std::get_if<CommPoint>(&st)) out.push_back(*c);
  return out;
}

TEST(Moe, AllToAllBytesAreTheClosedFormForBalancedRouting) {
  // Each rank routes T = b·s/tp tokens (SP) to top_k experts: its send buffer
  // holds T·top_k token copies of hidden·2 bytes, own share included; the
  // wire carries (ep − 1)/ep of it (the collective model's bus factor).
  for (int64_t ep : {2, 4, 8}) {
    const LayerShape s = moe_shape(16, 4, ep, 1);
    const int64_t tokens = s.micro_batch * s.seq_length / s.tp;
    const auto fwd = moe_dispatch_comms(s, ir::FORWARD);
    ASSERT_EQ(fwd.size(), 1u);
    EXPECT_EQ(fwd[0].group, CommGroup::kEp);
    EXPECT_EQ(fwd[0].kind, ir::ALL_TO_ALL);
    EXPECT_EQ(fwd[0].bytes, tokens * 4 * s.hidden * 2);
    const auto back = moe_combine_comms(s, ir::FORWARD);
    ASSERT_EQ(back.size(), 1u);
    EXPECT_EQ(back[0].kind, ir::ALL_TO_ALL);
    EXPECT_EQ(back[0].bytes, fwd[0].bytes);
    EXPECT_EQ(moe_tokens(s).expert, tokens * 4);  // balanced: what a rank sends, it receives
  }
}

TEST(Moe, ExpertTpGathersAfterTheAllToAll) {
  const LayerShape s = moe_shape(8, 2, 2, 2);
  const int64_t tokens = s.micro_batch * s.seq_length / s.tp;
  const auto fwd = moe_dispatch_comms(s, ir::FORWARD);
  ASSERT_EQ(fwd.size(), 2u);
  EXPECT_EQ(fwd[1].group, CommGroup::kExpertTp);
  EXPECT_EQ(fwd[1].kind, ir::ALL_GATHER);
  EXPECT_EQ(fwd[1].bytes, tokens * 2 * 2 * s.hidden * 2);
  const auto back = moe_combine_comms(s, ir::FORWARD);
  ASSERT_EQ(back.size(), 2u);
  EXPECT_EQ(back[0].group, CommGroup::kExpertTp);
  EXPECT_EQ(back[0].kind, ir::REDUCE_SCATTER);
  EXPECT_EQ(back[1].kind, ir::ALL_TO_ALL);
}

TEST(Moe, AllGatherDispatcherGathersEveryToken) {
  const LayerShape s = moe_shape(8, 2, 4, 1, scenario::DISPATCHER_ALLGATHER);
  const int64_t tokens = s.micro_batch * s.seq_length / s.tp;
  const auto fwd = moe_dispatch_comms(s, ir::FORWARD);
  ASSERT_EQ(fwd.size(), 1u);
  EXPECT_EQ(fwd[0].kind, ir::ALL_GATHER);
  EXPECT_EQ(fwd[0].bytes, tokens * 4 * s.hidden * 2);
  EXPECT_EQ(moe_combine_comms(s, ir::FORWARD)[0].kind, ir::REDUCE_SCATTER);
}

TEST(Moe, HierarchicalCarriesEachTokenOncePerDestinationDomain) {
  LayerShape s = moe_shape(8, 2, 4, 1, scenario::DISPATCHER_HIERARCHICAL);
  s.moe.ep_per_domain = 2;  // 2 domains of 2 EP ranks, 4 experts each
  const int64_t tokens = s.micro_batch * s.seq_length / s.tp;
  // P(a domain misses both of a token's experts) = C(4,2)/C(8,2) = 6/28.
  const double expected = tokens * 2 * (1 - 6.0 / 28);
  EXPECT_EQ(moe_inter_domain_tokens(s), std::llround(expected));
  const auto fwd = moe_dispatch_comms(s, ir::FORWARD);
  ASSERT_EQ(fwd.size(), 2u);
  EXPECT_EQ(fwd[0].group, CommGroup::kEpInterDomain);
  EXPECT_EQ(fwd[0].bytes, std::llround(expected) * s.hidden * 2);
  EXPECT_EQ(fwd[1].group, CommGroup::kEpIntraDomain);
  EXPECT_EQ(fwd[1].bytes, tokens * 2 * s.hidden * 2);
  // Fewer bytes cross domains than a flat all-to-all sends off-domain:
  // tokens · top_k · (domains − 1)/domains copies.
  EXPECT_LT(expected / 2, tokens * 2 * 0.5 + 1e-9);
  // One domain: a plain intra-domain all-to-all.
  s.moe.ep_per_domain = 4;
  const auto one = moe_dispatch_comms(s, ir::FORWARD);
  ASSERT_EQ(one.size(), 1u);
  EXPECT_EQ(one[0].group, CommGroup::kEpIntraDomain);
}

TEST(Moe, CapacityDropsAndPads) {
  LayerShape s = moe_shape(8, 2, 2, 1);
  const int64_t assignments = s.micro_batch * s.seq_length / s.tp * 2;  // 1024
  s.moe.capacity_factor = 0.5;
  const int64_t cap = static_cast<int64_t>(std::ceil(assignments / 8.0 * 0.5));
  EXPECT_EQ(moe_tokens(s).capacity, cap);
  EXPECT_EQ(moe_tokens(s).sent, cap * 8);  // balanced routing over capacity drops the rest
  s.moe.capacity_factor = 2;
  EXPECT_EQ(moe_tokens(s).sent, assignments);  // under capacity: dropless
  s.moe.pad_to_capacity = true;
  EXPECT_EQ(moe_tokens(s).sent, 2 * assignments);  // padded to the full capacity
}

TEST(Moe, LayerPattern) {
  MoeShape m;
  m.num_experts = 4;
  m.first_dense_layers = 3;
  m.layer_frequency = 2;
  std::vector<int64_t> moe;
  for (int64_t l = 0; l < 10; ++l)
    if (m.is_moe_layer(l)) moe.push_back(l);
  EXPECT_EQ(moe, (std::vector<int64_t>{3, 5, 7, 9}));
  m.num_experts = 0;
  EXPECT_FALSE(m.is_moe_layer(3));
}

TEST(Moe, ExpertParametersSplitOverEpAndExpertTp) {
  const LayerShape s = moe_shape(16, 2, 4, 2);
  // SwiGLU: FC1 (gate + up) and FC2, 3·h·f per expert, f split over expert TP.
  EXPECT_EQ(moe_routed_expert_parameters(s), (16 / 4) * 3 * s.hidden * (512 / 2));
  EXPECT_EQ(moe_mlp_parameters(s), moe_routed_expert_parameters(s) + s.hidden * 16);  // + router
}

// A MoE layer of one expert with top-1 routing, expert TP = TP and no EP is
// the dense layer plus the router, permute and unpermute kernels: every other
// kernel (roles mapped EXPERT_* -> dense) has the same shape, FLOPs and bytes,
// and the forward communication is the same TP collectives.
TEST(Moe, OneExpertTopOneIsTheDenseLayer) {
  LayerShape dense = base_shape();
  dense.ffn_hidden = 512;
  LayerShape moe = moe_shape(1, 1, 1, dense.tp);
  moe.moe.expert_ffn = dense.ffn_hidden;
  auto role_of = [](ir::KernelRole r) {
    switch (r) {
      case ir::ROLE_EXPERT_FC1: return ir::ROLE_FC1;
      case ir::ROLE_EXPERT_ACT: return ir::ROLE_ACT;
      case ir::ROLE_EXPERT_FC2: return ir::ROLE_FC2;
      default: return r;
    }
  };
  auto kernels = [&](const std::vector<Step>& steps) {
    std::vector<Kernel> out;
    for (const Step& st : steps)
      if (const auto* k = std::get_if<Kernel>(&st)) {
        if (k->role == ir::ROLE_ROUTER || k->role == ir::ROLE_MOE_PERMUTE || k->role == ir::ROLE_MOE_UNPERMUTE)
          continue;
        Kernel m = *k;
        m.role = role_of(m.role);
        out.push_back(m);
      }
    return out;
  };
  for (bool backward : {false, true}) {
    SCOPED_TRACE(backward ? "backward" : "forward");
    const auto a = kernels(backward ? layer_backward(dense, scenario::RECOMPUTE_NONE) : layer_forward(dense));
    const auto b = kernels(backward ? layer_backward(moe, scenario::RECOMPUTE_NONE) : layer_forward(moe));
    // The multiset of kernels (autograd order differs only in where the
    // wgrads sit).
    std::map<std::tuple<int, int, int, std::vector<int64_t>>, std::pair<int, double>> ka, kb;
    for (const Kernel& k : a) {
      auto& e = ka[{k.role, k.phase, k.op_class, k.shape}];
      ++e.first;
      e.second += k.flops + k.bytes;
    }
    for (const Kernel& k : b) {
      auto& e = kb[{k.role, k.phase, k.op_class, k.shape}];
      ++e.first;
      e.second += k.flops + k.bytes;
    }
    EXPECT_EQ(ka, kb);
  }
  // Forward: the dense MLP's all-gather before FC1 and reduce-scatter after
  // FC2 are the expert-TP gather and scatter, same bytes. The all-to-all
  // dispatcher adds the gather of the per-expert token counts (8 B for the
  // one expert from each of the 2 expert-TP ranks), as Megatron-Core runs it.
  std::vector<std::pair<int, int64_t>> ca, cb;
  int counts = 0;
  for (const CommPoint& c : comms(layer_forward(dense))) ca.push_back({c.kind, c.bytes});
  for (const CommPoint& c : comms(layer_forward(moe))) {
    if (c.group == CommGroup::kExpertTp && c.kind == ir::ALL_GATHER && c.bytes == 8 * 2) {
      ++counts;
      continue;
    }
    cb.push_back({c.kind, c.bytes});
  }
  EXPECT_EQ(counts, 1);
  EXPECT_EQ(ca, cb);
  // Model FLOPs: the dense MLP's plus the router's 2·tokens·h·experts.
  LayerShape one = unsharded(moe, 1);
  LayerShape one_dense = unsharded(dense, 1);
  const double router = 2.0 * one.tokens() * one.hidden * 1;
  EXPECT_DOUBLE_EQ(model_flops_per_iteration(one, 1, 1) - model_flops_per_iteration(one_dense, 1, 1), 3 * router);
}

// docs/moe.md#host-synchronisation: the host waits for the token counts
// before the forward permute, unless padding to capacity makes every size
// static; backward reuses the forward's sizes. The all-to-all dispatcher
// first gathers the counts (int64 per expert) over EP.
TEST(Moe, ForwardPermuteWaitsForTheTokenCountsOnTheHost) {
  auto permutes = [](const std::vector<Step>& steps) {
    std::vector<Kernel> out;
    for (const Step& st : steps)
      if (const auto* k = std::get_if<Kernel>(&st); k != nullptr && k->role == ir::ROLE_MOE_PERMUTE) out.push_back(*k);
    return out;
  };
  for (const auto dispatcher :
       {scenario::DISPATCHER_ALLTOALL, scenario::DISPATCHER_ALLGATHER, scenario::DISPATCHER_HIERARCHICAL}) {
    SCOPED_TRACE(scenario::MoeDispatcher_Name(dispatcher));
    LayerShape s = moe_shape(16, 2, 4, 1, dispatcher);
    s.moe.ep_per_domain = 2;
    for (const ir::Phase phase : {ir::FORWARD, ir::RECOMPUTE}) {
      std::vector<Step> fwd;
      moe_mlp_forward(fwd, s, phase);
      const auto p = permutes(fwd);
      ASSERT_EQ(p.size(), 1u);
      EXPECT_TRUE(p[0].host_sync);
      int count_gathers = 0;
      for (const CommPoint& c : comms(fwd))
        if (c.kind == ir::ALL_GATHER && c.bytes == 16 * 8 * 4) {
          EXPECT_EQ(c.group, CommGroup::kEp);
          ++count_gathers;
        }
      EXPECT_EQ(count_gathers, dispatcher == scenario::DISPATCHER_ALLTOALL ? 1 : 0);
    }
    std::vector<Step> bwd;
    moe_mlp_backward(bwd, s);
    for (const Kernel& k : permutes(bwd)) EXPECT_FALSE(k.host_sync);
  }
  // Padded to capacity: static sizes, no wait and no count gather.
  LayerShape padded = moe_shape(16, 2, 4, 1);
  padded.moe.capacity_factor = 1.0;
  padded.moe.pad_to_capacity = true;
  std::vector<Step> fwd;
  moe_mlp_forward(fwd, padded, ir::FORWARD);
  for (const Kernel& k : permutes(fwd)) EXPECT_FALSE(k.host_sync);
  for (const CommPoint& c : comms(fwd)) EXPECT_NE(c.bytes, 16 * 8 * 4);
}

TEST(Moe, ModelFlopsCountActivatedExperts) {
  LayerShape s = moe_shape(64, 4, 8, 1);
  s.moe.shared_ffn = 512;
  const LayerShape one = unsharded(s, 1);
  const double t = one.tokens(), h = one.hidden;
  // SwiGLU: 3·h·f per expert; top_k experts, the shared MLP and the router.
  const double moe_mlp = 2 * t * (4 * 3 * h * 512 + 3 * h * 512 + h * 64);
  const double dense_mlp = 2 * t * 3 * h * one.ffn_hidden;
  LayerShape dense = base_shape();
  EXPECT_NEAR(model_flops_per_iteration(one, 2, 1) - model_flops_per_iteration(unsharded(dense, 1), 2, 1),
              3 * 2 * (moe_mlp - dense_mlp), 1);
}

}  // namespace
}  // namespace lacuna::model
