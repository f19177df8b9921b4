#include "sim/scenario/defaults.h"

#include <string>

namespace lacuna::scenario {

namespace {

bool unset(const SourceMap& locations, const std::string& path, int64_t value) {
  return value == 0 && !locations.written(path);
}

// Placements whose encoders take GPUs of their own: the LLM's dp is then not
// GPUs / (tp·cp·pp), and the user must give it.
bool encoder_ranks_of_their_own(const Scenario& spec) {
  if (spec.model().encoders_size() == 0) return false;
  const auto kind = spec.placement().kind();
  return kind == HETEROGENEOUS || kind == MEGATRON_ENCODER_PP;
}

}  // namespace

std::vector<FilledDefault> apply_defaults(Scenario& spec, const SourceMap& locations) {
  std::vector<FilledDefault> out;
  auto& p = *spec.mutable_parallel();
  const auto one = [&](const char* field, int64_t value, void (ParallelPlan::*set)(int64_t), const char* why) {
    const std::string path = std::string("parallel.") + field;
    if (!unset(locations, path, value)) return;
    (p.*set)(1);
    out.push_back({path, "1", why});
  };
  one("tp", p.tp(), &ParallelPlan::set_tp, "not set: no tensor parallelism");
  one("cp", p.cp(), &ParallelPlan::set_cp, "not set: no context parallelism");
  one("pp", p.pp(), &ParallelPlan::set_pp, "not set: no pipeline parallelism");
  one("virtual_stages", p.virtual_stages(), &ParallelPlan::set_virtual_stages,
      "not set: one model chunk per pipeline rank (no interleaving)");
  // Only from values validation will accept (each in (0, 10^6]: the
  // products fit in int64); otherwise dp stays unset and validation says why.
  const auto sane = [](int64_t v) { return v > 0 && v <= 1'000'000; };
  const auto& cl = spec.cluster();
  const bool known = sane(cl.num_nodes()) && sane(cl.gpus_per_node()) && sane(p.tp()) && sane(p.cp()) && sane(p.pp());
  const int64_t gpus = known ? cl.num_nodes() * cl.gpus_per_node() : 0;
  const int64_t model = known ? p.tp() * p.cp() * p.pp() : 0;
  if (known && unset(locations, "parallel.dp", p.dp()) && !encoder_ranks_of_their_own(spec) && gpus % model == 0) {
    p.set_dp(gpus / model);
    out.push_back({"parallel.dp", std::to_string(p.dp()),
                   "not set: the cluster's " + std::to_string(gpus) + " GPUs / (tp·cp·pp = " + std::to_string(model) +
                       ")"});
  }
  // ep and expert_tp keep their 0, which the schema defines as 1 and tp
  // (scenario.proto; MoE validation reports expert-TP problems at the expert
  // width when expert_tp is inherited): reported, not written.
  if (spec.model().llm().moe().num_experts() > 0) {
    if (unset(locations, "parallel.ep", p.ep()))
      out.push_back({"parallel.ep", "1", "not set (0): no expert parallelism, Megatron-Core's default"});
    if (unset(locations, "parallel.expert_tp", p.expert_tp()))
      out.push_back({"parallel.expert_tp", "tp = " + std::to_string(p.tp()),
                     "not set (0): tp, as Megatron-Core's --expert-tensor-parallel-size defaults"});
  }
  if (spec.schedule().kind() == SCHEDULE_UNSPECIFIED && !locations.written("schedule.kind") &&
      !spec.schedule().actions_file().empty()) {
    spec.mutable_schedule()->set_kind(CUSTOM);
    out.push_back({"schedule.kind", "CUSTOM", "not set: schedule.actions_file gives the order"});
  }
  if (spec.schedule().kind() == SCHEDULE_UNSPECIFIED && !locations.written("schedule.kind")) {
    const bool interleaved = p.virtual_stages() > 1;
    spec.mutable_schedule()->set_kind(interleaved ? INTERLEAVED_1F1B : ONE_F_ONE_B);
    out.push_back({"schedule.kind", interleaved ? "INTERLEAVED_1F1B" : "ONE_F_ONE_B",
                   interleaved ? "not set: Megatron-LM's schedule with virtual_stages > 1"
                               : "not set: Megatron-LM's schedule without virtual stages"});
  }
  auto& t = *spec.mutable_training();
  if (unset(locations, "training.micro_batch", t.micro_batch())) {
    t.set_micro_batch(1);
    out.push_back({"training.micro_batch", "1", "not set: one sequence per microbatch"});
  }
  return out;
}

}  // namespace lacuna::scenario
