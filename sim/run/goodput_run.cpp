#include "sim/run/goodput_run.h"

#include <cmath>
#include <limits>
#include <memory>

#include <fmt/format.h>

#include "sim/core/error.h"
#include "sim/core/option_text.h"
#include "sim/goodput/fleet_defaults.h"
#include "sim/placement/compile.h"
#include "sim/report/analyses/summary.h"
#include "sim/run/simulation_input.h"
#include "sim/run/single_run.h"

namespace lacuna::run {
namespace {

void require(bool ok, const char* option, const std::string& what) {
  if (!ok) throw Error(SourceLocation{}, what, "set " + option_ref(option));
}

// Every distinct checkpoint byte, and the largest share of one GPU: each
// model-parallel group's weights once (the ranks of DP and CP coordinate 0),
// a distributed optimizer's shards each once (every rank's), otherwise the
// optimizer state once per model-parallel group. A fully parallel save
// (Megatron-Core's FullyParallelSaveStrategyWrapper, dist_checkpointing/
// strategies/fully_parallel.py, on unless --no-ckpt-fully-parallel-save;
// read at core_v0.12.0) spreads the replicated part over the data-parallel
// ranks, so a GPU copies
// its optimizer shard and 1/(dp·cp) of its weights, or 1/(dp·cp) of both
// without the distributed optimizer. Expert parallelism's own replication
// is not told apart.
std::pair<Bytes, Bytes> checkpoint_bytes(const ir::Program& p) {
  const bool sharded = p.info().distributed_optimizer();
  int64_t dp = 1, cp = 1;
  for (const ir::RankBinding& b : p.ranks()) {
    dp = std::max<int64_t>(dp, b.coord().dp() + 1);
    cp = std::max<int64_t>(cp, b.coord().cp() + 1);
  }
  int64_t total = 0, largest = 0;
  for (const ir::RankBinding& b : p.ranks()) {
    const ir::MemoryBaseline& m = p.classes(b.class_id()).memory();
    const bool first_replica = b.coord().dp() == 0 && b.coord().cp() == 0;
    if (first_replica) total += m.weights_bytes();
    if (sharded || first_replica) total += m.optimizer_bytes();
    const int64_t share = sharded ? m.optimizer_bytes() + m.weights_bytes() / (dp * cp)
                                  : (m.optimizer_bytes() + m.weights_bytes()) / (dp * cp);
    largest = std::max(largest, share);
  }
  return {Bytes(total), Bytes(largest)};
}

}  // namespace

GoodputReport run_goodput(const scenario::LoadedScenario& scenario, const GoodputOptions& o) {
  require(std::isfinite(o.tokens) && o.tokens >= 1, "tokens",
          fmt::format("the run trains a positive, finite number of tokens, not {}", o.tokens));
  require(o.runs >= 1, "runs", fmt::format("at least one Monte Carlo run, not {}", o.runs));
  if (o.storage_gb_per_s)
    require(std::isfinite(*o.storage_gb_per_s) && *o.storage_gb_per_s >= 1e-3, "storage-gb-per-s",
            "the storage bandwidth is finite and at least 0.001 GB/s");
  if (o.host_link_gb_per_s)
    require(std::isfinite(*o.host_link_gb_per_s) && *o.host_link_gb_per_s >= 1e-3, "host-link-gb-per-s",
            "the host link bandwidth is finite and at least 0.001 GB/s");
  if (o.save_blocking_s)
    require(std::isfinite(*o.save_blocking_s) && *o.save_blocking_s >= 0, "save-s",
            "a save blocks a finite number of seconds >= 0");
  if (o.checkpoint_interval_s)
    require(std::isfinite(*o.checkpoint_interval_s) && *o.checkpoint_interval_s >= 0, "checkpoint-interval",
            "the checkpoint interval is a finite number of seconds >= 0 (0: no checkpoints)");

  GoodputReport r;
  const ir::Program program = placement::compile(scenario);
  const std::unique_ptr<cost::CostModel> cost =
      make_cost_model({}, program.cluster(), program.info().precision());
  const SummarizedRun simulated = simulate_and_summarize(program, *cost, o.network, /*fold=*/true);
  r.iteration_time = simulated.summary.iteration_time;
  r.tokens_per_iteration = program.info().tokens_per_iteration();
  r.gpus = program.info().num_ranks();
  const int64_t per_node = program.cluster().gpus_per_node();
  if (per_node <= 0 || r.tokens_per_iteration <= 0 || r.iteration_time <= TimeNs::zero())
    throw InternalError("goodput: the compiled program has no GPUs per node, tokens or iteration time");
  r.hosts = (r.gpus + per_node - 1) / per_node;
  require(o.tokens / static_cast<double>(r.tokens_per_iteration) <= 1e15, "tokens",
          fmt::format("{:.3g} tokens are {:.3g} iterations of {} tokens; lacuna counts up to 10^15", o.tokens,
                      o.tokens / static_cast<double>(r.tokens_per_iteration), r.tokens_per_iteration));
  r.iterations = static_cast<int64_t>(std::ceil(o.tokens / static_cast<double>(r.tokens_per_iteration)));
  const double work_s = static_cast<double>(r.iterations) * static_cast<double>(r.iteration_time.count()) * 1e-9;

  const auto [total, largest] = checkpoint_bytes(program);
  r.checkpoint_bytes = total;
  r.largest_share_bytes = largest;
  // An option, else the scenario's reliability field, else the default.
  const scenario::Reliability& rel = scenario.spec.reliability();
  r.storage_gb_per_s = o.storage_gb_per_s      ? *o.storage_gb_per_s
                       : rel.has_storage_gb_per_s() ? rel.storage_gb_per_s()
                                                    : kDefaultStorageGbPerS;
  r.host_link_gb_per_s = o.host_link_gb_per_s        ? *o.host_link_gb_per_s
                         : rel.has_host_link_gb_per_s() ? rel.host_link_gb_per_s()
                                                        : kDefaultHostLinkGbPerS;
  r.save_given = o.save_blocking_s || rel.has_save_blocking_s();
  r.save_s = o.save_blocking_s         ? *o.save_blocking_s
             : rel.has_save_blocking_s() ? rel.save_blocking_s()
                                         : static_cast<double>(largest.count()) / (r.host_link_gb_per_s * 1e9);
  r.upload_s = static_cast<double>(total.count()) / (r.storage_gb_per_s * 1e9);
  r.load_s = r.upload_s;

  goodput::GoodputInputs& in = r.inputs;
  in.work_s = work_s;
  in.runs = o.runs;
  in.seed = o.seed;
  if (o.failures) {
    in.components = goodput::default_components(r.gpus, r.hosts, r.load_s);
    for (goodput::ComponentKind& k : in.components) {
      const auto it = rel.components().find(k.name);
      if (it == rel.components().end()) continue;
      const scenario::ComponentReliability& c = it->second;
      if (c.has_rate_per_hour()) k.rate_per_hour = c.rate_per_hour();
      if (c.has_detection_s()) k.recovery.detection_s = c.detection_s();
      if (c.has_diagnosis_s()) k.recovery.diagnosis_s = c.diagnosis_s();
      if (c.has_replacement_s()) k.recovery.replacement_s = c.replacement_s();
      if (c.has_relaunch_s()) k.recovery.relaunch_s = c.relaunch_s();
    }
  }
  const double lambda = goodput::failure_rate_per_s(in.components);
  r.mtbf_s = lambda > 0 ? 1.0 / lambda : std::numeric_limits<double>::infinity();
  r.young_s = lambda > 0 ? goodput::young_interval_s(r.save_s, r.mtbf_s) : 0;
  r.daly_s = lambda > 0 ? goodput::daly_interval_s(r.save_s, r.mtbf_s) : 0;
  in.checkpoint.interval_s = o.checkpoint_interval_s             ? *o.checkpoint_interval_s
                             : rel.has_checkpoint_interval_s() ? rel.checkpoint_interval_s()
                                                               : r.daly_s;
  in.checkpoint.save_blocking_s = r.save_s;
  in.checkpoint.upload_s = r.upload_s;
  try {
    r.result = goodput::simulate_goodput(in);
  } catch (const Error& e) {
    // The model's fields, as the options that set them.
    const std::string& f = e.where().field;
    const char* option = f == "work_s"                  ? "tokens"
                         : f == "runs"                  ? "runs"
                         : f == "checkpoint.interval_s" ? "checkpoint-interval"
                                                        : nullptr;
    if (option == nullptr) throw;
    throw Error(SourceLocation{}, e.problem(), "set " + option_ref(option));
  }
  return r;
}

}  // namespace lacuna::run
