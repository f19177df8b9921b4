#include "sim/placement/hetero_plan.h"

#include <algorithm>
#include <numeric>

#include "sim/core/error.h"

namespace lacuna::placement::hetero {
namespace {

std::string s(int64_t v) { return std::to_string(v); }

int32_t positive(int64_t v) { return v > 0 ? static_cast<int32_t>(v) : 1; }

std::string rank_list(const std::vector<int32_t>& ranks) {
  std::string out;
  const size_t shown = std::min<size_t>(ranks.size(), 8);
  for (size_t i = 0; i < shown; ++i) out += (i ? ", " : "") + s(ranks[i]);
  if (shown < ranks.size()) out += ", … (" + s(static_cast<int64_t>(ranks.size())) + " ranks)";
  return out;
}

class Checker {
 public:
  explicit Checker(const scenario::LoadedScenario& sc) : sc_(sc) {}
  [[noreturn]] void fail(const std::string& field, const std::string& what, const std::string& fix) const {
    throw Error(sc_.locations.locate(field), what, fix);
  }

 private:
  const scenario::LoadedScenario& sc_;
};

LlmPlan make_llm(const scenario::LoadedScenario& sc, const Checker& c) {
  const auto& spec = sc.spec;
  const auto& par = spec.parallel();
  LlmPlan llm;
  llm.dims = {positive(par.tp()), positive(par.cp()), positive(par.dp()), positive(par.pp())};
  llm.rank_order = par.rank_order();
  llm.global_batch = spec.training().global_batch();
  llm.micro_batch = spec.training().micro_batch();
  if (llm.micro_batch <= 0 || llm.global_batch <= 0 || llm.global_batch % (llm.micro_batch * llm.dims.dp) != 0)
    c.fail("training.global_batch",
           "global batch " + s(llm.global_batch) +
               " is not a positive multiple of micro_batch × dp = " + s(llm.micro_batch * llm.dims.dp),
           "choose a global batch divisible by micro_batch × dp");
  llm.microbatches = static_cast<int32_t>(llm.global_batch / (llm.micro_batch * llm.dims.dp));
  llm.samples_per_replica = llm.global_batch / llm.dims.dp;
  llm.hidden = spec.model().llm().hidden_size();
  llm.distributed_optimizer = par.distributed_optimizer();
  llm.gpus_per_node = static_cast<int32_t>(spec.cluster().has_gpus_per_node() ? spec.cluster().gpus_per_node() : 8);
  if (llm.gpus_per_node <= 0) llm.gpus_per_node = 8;
  return llm;
}

EncoderPlan make_encoder(const scenario::LoadedScenario& sc, const Checker& c, const LlmPlan& llm, int e) {
  const auto& spec = sc.spec;
  const auto& enc = spec.model().encoders(e);
  const auto& l = enc.layout();
  const std::string at = "model.encoders[" + s(e) + "].layout";
  const std::string who = "encoder " + s(e);
  for (const auto& [field, v] :
       {std::pair{"tp", l.tp()}, std::pair{"cp", l.cp()}, std::pair{"pp", l.pp()}, std::pair{"dp", l.dp()},
        std::pair{"virtual_stages", l.virtual_stages()}, std::pair{"first_rank", l.first_rank()}})
    if (v < 0)
      c.fail(at + "." + field, who + ": layout." + field + " = " + s(v) + " is negative", "use 0 (= 1) or more");
  // Sizes fit int32 ranks: checked before anything multiplies them.
  const __int128 world = static_cast<__int128>(std::max<int64_t>(l.tp(), 1)) * std::max<int64_t>(l.cp(), 1) *
                         std::max<int64_t>(l.pp(), 1) * std::max<int64_t>(l.dp(), 1);
  if (world > (int64_t{1} << 24) || l.first_rank() > (int64_t{1} << 24))
    c.fail(at, who + ": tp·cp·pp·dp and first_rank must stay below 2^24 ranks", "use fewer ranks");
  EncoderPlan p;
  p.e = e;
  p.module = e + 1;
  p.name = enc.transformer().name().empty() ? "encoder" + s(e) : enc.transformer().name();
  p.layout = l;
  p.dims = {positive(l.tp()), positive(l.cp()), positive(l.dp()), positive(l.pp())};
  p.rank_order = l.rank_order();
  p.frozen = enc.frozen();
  p.recompute = l.recompute();
  if (l.recompute_num_layers() < 0)
    c.fail(at + ".recompute_num_layers", who + ": recompute_num_layers = " + s(l.recompute_num_layers()) + " is negative",
           "the layers of each pipeline stage to recompute, or 0 for all");
  if (l.recompute_num_layers() > 0 && l.recompute() != scenario::RECOMPUTE_FULL)
    c.fail(at + ".recompute_num_layers",
           who + ": recompute_num_layers needs recompute: RECOMPUTE_FULL (Megatron-LM rejects --recompute-num-layers "
                 "with selective recompute)",
           "set recompute: RECOMPUTE_FULL, or remove recompute_num_layers");
  p.recompute_num_layers = l.recompute_num_layers();
  if (l.virtual_stages() > 1)
    c.fail(at + ".virtual_stages",
           who + ": virtual pipeline stages (" + s(l.virtual_stages()) +
               ") are not supported for encoders in the heterogeneous placement",
           "set virtual_stages: 1 (or leave it unset)");
  try {
    compiler::RankLayout check(p.dims, p.rank_order);
  } catch (const Error& err) {
    c.fail(at + ".rank_order", who + ": " + err.problem(), err.fix());
  }

  // Shapes the encoder's layout must divide (the LLM's equivalents are
  // checked by scenario validation).
  const auto& t = enc.transformer();
  const int64_t tp = p.dims.tp, cp = p.dims.cp;
  const int64_t kv = t.num_kv_heads() > 0 ? t.num_kv_heads() : t.num_attention_heads();
  if (t.num_attention_heads() % tp != 0 || kv % tp != 0)
    c.fail(at + ".tp",
           who + ": tp = " + s(tp) + " must divide its attention heads (" + s(t.num_attention_heads()) +
               ") and key/value heads (" + s(kv) + ")",
           "choose an encoder tp dividing " + s(std::gcd(t.num_attention_heads(), kv)));
  if (t.ffn_hidden_size() % tp != 0)
    c.fail(at + ".tp", who + ": tp = " + s(tp) + " must divide ffn_hidden_size (" + s(t.ffn_hidden_size()) + ")",
           "choose an encoder tp dividing " + s(t.ffn_hidden_size()));
  const int64_t tokens = t.seq_length();  // per image
  if (tokens <= 0 || tokens % cp != 0)
    c.fail(at + ".cp", who + ": cp = " + s(cp) + " must divide the tokens per image (" + s(tokens) + ")",
           "choose an encoder cp dividing " + s(tokens));
  if (l.sequence_parallel() && tp == 1)
    c.fail(at + ".sequence_parallel", who + ": sequence_parallel needs tp > 1",
           "set sequence_parallel: false, or an encoder tp ≥ 2");
  p.sequence_parallel = l.sequence_parallel() && tp > 1;
  if (p.sequence_parallel && (tokens / cp) % tp != 0)
    c.fail(at + ".sequence_parallel",
           who + ": sequence parallelism splits the " + s(tokens / cp) +
               " tokens per image and CP rank over tp = " + s(tp) + ", which does not divide them",
           "choose an encoder tp dividing " + s(tokens / cp) + ", or turn sequence_parallel off");
  p.layers = t.num_layers();
  if (p.layers <= 0 || p.layers % p.dims.pp != 0)
    c.fail(at + ".pp", who + ": pp = " + s(p.dims.pp) + " must divide its " + s(p.layers) + " layers",
           "choose an encoder pp dividing " + s(p.layers));
  p.layers_per_stage = p.layers / p.dims.pp;

  // Rank set: the LLM's own (colocated) or an island after it.
  const int32_t llm_world = llm.dims.world();
  p.first_rank = static_cast<int32_t>(l.first_rank());
  if (p.first_rank == 0) {
    p.colocated = true;
    if (p.world() != llm_world)
      c.fail(at,
             who + " is colocated (first_rank 0) on " + s(p.world()) + " ranks (tp·cp·pp·dp), the LLM on " +
                 s(llm_world) + ": a colocated encoder must use exactly the LLM's ranks",
             "make the encoder's tp·cp·pp·dp equal " + s(llm_world) + ", or put it on an island (first_rank ≥ " +
                 s(llm_world) + ")");
  } else if (p.first_rank < llm_world) {
    c.fail(at + ".first_rank",
           who + ": first_rank " + s(p.first_rank) + " overlaps the LLM's ranks [0, " + s(llm_world) + ") only partly",
           "use first_rank 0 (colocated) or ≥ " + s(llm_world) + " (an encoder island)");
  }

  // Batch shards: one DP must divide the other (the boundary communicator
  // pairs shards 1:1, concatenates or splits).
  const int32_t dpe = p.dims.dp, dpl = llm.dims.dp;
  if (dpe % dpl != 0 && dpl % dpe != 0)
    c.fail(at + ".dp",
           who + ": dp = " + s(dpe) + " and the LLM's dp = " + s(dpl) +
               " must divide one another (the boundary maps whole batch shards)",
           "choose an encoder dp that is a multiple or a divisor of " + s(dpl));
  p.relation = dpe == dpl ? DpRelation::kEqual : dpe > dpl ? DpRelation::kFanIn : DpRelation::kFanOut;
  p.ratio = dpe >= dpl ? dpe / dpl : dpl / dpe;
  if (llm.global_batch % dpe != 0)
    c.fail(at + ".dp", who + ": the global batch " + s(llm.global_batch) + " does not split over dp = " + s(dpe),
           "choose an encoder dp dividing " + s(llm.global_batch));
  p.samples_per_shard = llm.global_batch / dpe;
  p.vision_tokens_per_sample = model::vision_tokens_per_sample(spec, e);

  if (p.colocated) {
    // The shard's samples in microbatches of the LLM's micro_batch (fewer
    // when the shard holds fewer samples than one microbatch).
    p.microbatch_samples = std::min(llm.micro_batch, p.samples_per_shard);
    if (p.samples_per_shard % p.microbatch_samples != 0)
      c.fail(at + ".dp",
             who + ": each of its dp = " + s(dpe) + " shards holds " + s(p.samples_per_shard) +
                 " samples, not a multiple of the micro_batch " + s(llm.micro_batch),
             "choose an encoder dp such that global_batch / dp is a multiple of micro_batch");
    p.microbatches = static_cast<int32_t>(p.samples_per_shard / p.microbatch_samples);
  } else {
    // Encoder microbatch i = the samples of LLM microbatch i of the replicas
    // this shard serves.
    p.microbatches = llm.microbatches;
    switch (p.relation) {
      case DpRelation::kEqual:
        p.microbatch_samples = llm.micro_batch;
        break;
      case DpRelation::kFanOut:
        p.microbatch_samples = llm.micro_batch * p.ratio;
        break;
      case DpRelation::kFanIn:
        if (llm.micro_batch % p.ratio != 0)
          c.fail(at + ".dp",
                 who + ": with dp = " + s(dpe) + " encoder shards per " + s(dpl) +
                     " LLM replicas, each of the LLM's microbatches (" + s(llm.micro_batch) +
                     " samples) would be split over " + s(p.ratio) + " shards, which does not divide it",
                 "choose an encoder dp such that dp / " + s(dpl) + " divides micro_batch " + s(llm.micro_batch) +
                     ", or a larger micro_batch");
        p.microbatch_samples = llm.micro_batch / p.ratio;
        break;
    }
  }
  return p;
}

// Colocated: every encoder shard inside one LLM replica (fan-in, equal), or
// every LLM replica inside one encoder shard (fan-out), so that the boundary
// is a collective among ranks that hold both sides.
void check_colocated_mapping(const Checker& c, const Plan& plan, const EncoderPlan& enc) {
  const compiler::RankLayout llm(plan.llm.dims, plan.llm.rank_order);
  const compiler::RankLayout el(enc.dims, enc.rank_order);
  const std::string at = "model.encoders[" + s(enc.e) + "].layout";
  const std::string fix =
      "use rank orders that keep them nested: e.g. tp-cp-dp-pp for both with the encoder's tp·cp dividing the "
      "LLM's tp·cp (fan-in), or the LLM rank order tp-cp-pp-dp so that each LLM replica's ranks are contiguous";
  if (enc.relation != DpRelation::kFanOut) {
    for (int32_t k = 0; k < enc.dims.dp; ++k) {
      // Every stage of the shard (its pipeline stays inside the replica).
      std::vector<int32_t> ranks;
      for (int32_t j = 0; j < enc.dims.pp; ++j)
        for (int32_t r : encoder_shard_ranks(enc, k, j)) ranks.push_back(r);
      std::sort(ranks.begin(), ranks.end());
      const int32_t d = llm.coordinates(ranks.front()).dp();
      for (int32_t r : ranks)
        if (llm.coordinates(r).dp() != d)
          c.fail(at,
                 "encoder " + s(enc.e) + ": its data-parallel shard " + s(k) + " (ranks " + rank_list(ranks) +
                     ") spans LLM data-parallel replicas " + s(d) + " and " + s(llm.coordinates(r).dp()) +
                     "; a colocated encoder shard must lie inside the one LLM replica it feeds (its output is "
                     "gathered among that replica's ranks)",
                 fix);
    }
  } else {
    for (int32_t d = 0; d < plan.llm.dims.dp; ++d) {
      const auto ranks = llm_replica_ranks(plan.llm, d);
      const int32_t k = el.coordinates(ranks.front()).dp();
      for (int32_t r : ranks)
        if (el.coordinates(r).dp() != k)
          c.fail(at,
                 "encoder " + s(enc.e) + ": LLM data-parallel replica " + s(d) + " (ranks " + rank_list(ranks) +
                     ") spans encoder shards " + s(k) + " and " + s(el.coordinates(r).dp()) +
                     "; with fewer encoder shards than LLM replicas (fan-out) each replica must lie inside the "
                     "one encoder shard that feeds it (a local slice of that shard's output)",
                 fix);
    }
  }
}

}  // namespace

std::vector<int32_t> encoder_shard_ranks(const EncoderPlan& enc, int32_t shard, int32_t stage) {
  const compiler::RankLayout el(enc.dims, enc.rank_order);
  std::vector<int32_t> out;
  for (int32_t cp = 0; cp < enc.dims.cp; ++cp)
    for (int32_t tp = 0; tp < enc.dims.tp; ++tp) {
      ir::Coordinates c;
      c.set_tp(tp);
      c.set_cp(cp);
      c.set_dp(shard);
      c.set_pp(stage);
      out.push_back(enc.first_rank + el.rank(c));
    }
  std::sort(out.begin(), out.end());
  return out;
}

std::vector<int32_t> llm_replica_ranks(const LlmPlan& llm, int32_t replica) {
  const compiler::RankLayout layout(llm.dims, llm.rank_order);
  std::vector<int32_t> out;
  for (int32_t pp = 0; pp < llm.dims.pp; ++pp)
    for (int32_t cp = 0; cp < llm.dims.cp; ++cp)
      for (int32_t tp = 0; tp < llm.dims.tp; ++tp) {
        ir::Coordinates c;
        c.set_tp(tp);
        c.set_cp(cp);
        c.set_dp(replica);
        c.set_pp(pp);
        out.push_back(layout.rank(c));
      }
  std::sort(out.begin(), out.end());
  return out;
}

int32_t colocated_replica_of_shard(const Plan& plan, const EncoderPlan& enc, int32_t shard) {
  const compiler::RankLayout llm(plan.llm.dims, plan.llm.rank_order);
  return llm.coordinates(encoder_shard_ranks(enc, shard, 0).front()).dp();
}

int32_t colocated_shard_of_replica(const Plan& plan, const EncoderPlan& enc, int32_t replica) {
  const compiler::RankLayout el(enc.dims, enc.rank_order);
  return el.coordinates(llm_replica_ranks(plan.llm, replica).front()).dp();
}

Plan make_plan(const scenario::LoadedScenario& scenario) {
  const Checker c(scenario);
  const auto& spec = scenario.spec;
  Plan plan;
  plan.llm = make_llm(scenario, c);
  if (spec.model().encoders_size() == 0)
    c.fail("model.encoders", "the heterogeneous placement needs at least one encoder", "add model.encoders");
  for (int e = 0; e < spec.model().encoders_size(); ++e)
    plan.encoders.push_back(make_encoder(scenario, c, plan.llm, e));

  plan.colocated = plan.encoders.front().colocated;
  for (const auto& enc : plan.encoders)
    if (enc.colocated != plan.colocated)
      c.fail("model.encoders[" + s(enc.e) + "].layout.first_rank",
             "encoder " + s(enc.e) + " is " + (enc.colocated ? "colocated" : "on an island") + " but encoder 0 is " +
                 (plan.colocated ? "colocated" : "on an island") +
                 "; mixing colocated and non-colocated encoders in one program is not supported",
             "put every encoder on the LLM's ranks (first_rank 0) or every encoder on its own island");

  const int32_t llm_world = plan.llm.dims.world();
  plan.total_ranks = llm_world;
  if (!plan.colocated) {
    // Islands tile the ranks after the LLM's, each encoder on its own: no
    // rank may be left without a program, none may hold two encoders.
    std::vector<const EncoderPlan*> order;
    for (const auto& enc : plan.encoders) order.push_back(&enc);
    std::stable_sort(order.begin(), order.end(),
                     [](const EncoderPlan* a, const EncoderPlan* b) { return a->first_rank < b->first_rank; });
    int32_t next = llm_world;
    for (const EncoderPlan* enc : order) {
      if (enc->first_rank != next)
        c.fail("model.encoders[" + s(enc->e) + "].layout.first_rank",
               "encoder " + s(enc->e) + "'s island starts at rank " + s(enc->first_rank) +
                   " but the next free rank is " + s(next) +
                   (enc->first_rank < next ? " (islands overlap)" : " (ranks in between would be idle)"),
               "islands follow the LLM's " + s(llm_world) + " ranks back to back: set first_rank: " + s(next));
      next += enc->world();
    }
    plan.total_ranks = next;
  }
  const int64_t gpn = plan.llm.gpus_per_node;
  if (spec.cluster().has_num_nodes() && spec.cluster().num_nodes() * gpn < plan.total_ranks)
    c.fail("cluster.num_nodes",
           "the program needs " + s(plan.total_ranks) + " GPUs (the LLM's " + s(llm_world) +
               (plan.colocated ? "" : " plus the encoder islands") + "), the cluster has " +
               s(spec.cluster().num_nodes() * gpn),
           "set num_nodes to at least " + s((plan.total_ranks + gpn - 1) / gpn));
  if (plan.colocated)
    for (const auto& enc : plan.encoders) check_colocated_mapping(c, plan, enc);
  return plan;
}

}  // namespace lacuna::placement::hetero
