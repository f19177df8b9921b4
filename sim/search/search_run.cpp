#include "sim/search/search_run.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <memory>
#include <mutex>
#include <new>
#include <numeric>
#include <optional>
#include <set>
#include <sstream>

#include <fmt/format.h>
#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/io/zero_copy_stream_impl_lite.h>
#include <nlohmann/json.hpp>

#include "sim/core/error.h"
#include "sim/core/input_file.h"
#include "sim/core/parallel_map.h"
#include "sim/cost/memory_peak.h"
#include "sim/parallel/work_split.h"
#include "sim/placement/compile.h"
#include "sim/placement/hetero_layouts.h"
#include "sim/report/analyses/summary.h"
#include "sim/run/batch_estimate.h"
#include "sim/run/simulation_input.h"
#include "sim/run/simulation_run.h"
#include "sim/search/search_journal.h"
#include "sim/core/atomic_file.h"

namespace lacuna::search {
namespace {

using Clock = std::chrono::steady_clock;
double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

// Plans screened per work item: large enough that handing out items costs
// nothing, small enough that threads and processes share the work evenly.
constexpr size_t kScreenChunk = 4096;

// One screened plan as it travels between processes (fixed size, memcpy).
struct ScreenRecord {
  int8_t fate = 0;
  double iteration_s = 0, tokens_per_s = 0, mfu = 0, bubble_s = 0, exposed_comm_s = 0;
  int64_t gpus = 0, memory = 0, memory_lower_bound = 0;
};

// Screens cache per-layer figures; threads borrow one each.
class ScreenPool {
 public:
  explicit ScreenPool(const scenario::Scenario& base) : base_(base) {}
  std::unique_ptr<Screen> take() {
    std::lock_guard<std::mutex> hold(lock_);
    if (free_.empty()) return std::make_unique<Screen>(base_);
    std::unique_ptr<Screen> s = std::move(free_.back());
    free_.pop_back();
    return s;
  }
  void give(std::unique_ptr<Screen> s) {
    std::lock_guard<std::mutex> hold(lock_);
    free_.push_back(std::move(s));
  }

 private:
  const scenario::Scenario& base_;
  std::mutex lock_;
  std::vector<std::unique_ptr<Screen>> free_;
};

std::string first_line(const std::string& text) {
  const size_t nl = text.find('\n');
  return nl == std::string::npos ? text : text.substr(0, nl);
}

// One plan compiled for its run: the cost model that planned it and will
// time it, the program, and for a heterogeneous placement the layouts the
// builder chose.
struct PreparedPlan {
  std::unique_ptr<cost::CostModel> cost;
  ir::Program program;
  std::string layout;
};

// Compiles one plan the way `lacuna simulate --fold` would compile its
// scenario. Throws lacuna::Error when the compiler rejects the plan.
std::unique_ptr<PreparedPlan> prepare_plan(const scenario::LoadedScenario& base, const Plan& plan,
                                           const run::CalibrationChoice& calibration) {
  auto prepared = std::make_unique<PreparedPlan>();
  scenario::LoadedScenario loaded = base;
  loaded.spec = apply_plan(base.spec, plan);
  // An LLM-only plan is checked as a file would be. A multimodal one is
  // built the way `lacuna compare` builds each placement, whose builders
  // check what the placement needs (the file's own placement rules would
  // refuse, e.g., context parallelism under an OPTIMUS scenario).
  if (plan.placement == Placement::kNone) scenario::validate_scenario(loaded.spec, loaded.locations);
  prepared->cost = run::make_cost_model(calibration, loaded.spec.cluster(), loaded.spec.training().precision());
  const cost::CostModel& cost = *prepared->cost;
  if (plan.placement == Placement::kHeteroColocated || plan.placement == Placement::kHeteroNonColocated) {
    placement::HeteroChoice choice = placement::choose_heterogeneous(
        loaded,
        plan.placement == Placement::kHeteroColocated ? placement::HeteroMode::kColocated
                                                      : placement::HeteroMode::kNonColocated,
        cost);
    prepared->layout = choice.description;
    prepared->program = std::move(choice.program);
  } else if (plan.placement != Placement::kNone) {
    prepared->program = placement::compile_as(loaded, placement_kind(plan.placement), cost);
  } else {
    prepared->program = placement::compile(loaded, cost);
  }
  return prepared;
}

run::RunSettings plan_run_settings(run::NetworkMode network) {
  run::RunSettings settings;
  settings.fold = true;
  settings.network = network;
  return settings;
}

// Compiles (unless the estimate kept its compile) and simulates one plan;
// the record is JSON. A plan the compiler rejects, or a run that fails on
// its input (lacuna::Error; a program too large for this machine's memory),
// gives a record with its problem: it never stops the search. A defect of
// lacuna's (InternalError, e.g. an MFU above 1) is not a plan's problem: it
// stops the search as an internal error, never a row.
std::string simulate_plan(const scenario::LoadedScenario& base, const Plan& plan, run::NetworkMode network,
                          const run::CalibrationChoice& calibration, std::unique_ptr<PreparedPlan> kept) {
  nlohmann::json j;
  try {
    const std::unique_ptr<PreparedPlan> prepared = kept ? std::move(kept) : prepare_plan(base, plan, calibration);
    if (plan.placement == Placement::kHeteroColocated || plan.placement == Placement::kHeteroNonColocated)
      j["layout"] = prepared->layout;
    run::SimulationRun run(prepared->program, *prepared->cost, plan_run_settings(network));
    const report::Summary s = run.run();
    j["iteration_s"] = s.iteration_time.seconds();
    j["tokens_per_s"] = s.tokens_per_s;
    j["mfu"] = s.mfu;
    j["gpus"] = s.num_gpus;
    j["peak_memory_bytes"] = s.peak_memory.max;
  } catch (const Error& e) {
    j = nlohmann::json{{"problem", first_line(e.what())}};
  } catch (const std::bad_alloc&) {
    j = nlohmann::json{{"problem", "the plan's simulation does not fit in this machine's memory"}};
  }
  return j.dump();
}

// Compiles one plan and estimates its run (run::ItemEstimate), keeping the
// compile for the run when it fits the slots' budget. A plan that fails to
// compile is estimated as failed; its run gives the problem.
std::string estimate_plan(const scenario::LoadedScenario& base, const Plan& plan, run::NetworkMode network,
                          const run::CalibrationChoice& calibration, size_t slot,
                          run::PreparedSlots<PreparedPlan>& slots) {
  run::ItemEstimate e;
  try {
    e = run::estimate_item([&] { return prepare_plan(base, plan, calibration); }, plan_run_settings(network), slot,
                           slots);
  } catch (const Error&) {
    e = run::ItemEstimate{};
  } catch (const std::bad_alloc&) {
    e = run::ItemEstimate{};
  }
  return run::encode_item_estimate(e);
}

std::vector<double> ranks_of(const std::vector<double>& x) {
  std::vector<size_t> order(x.size());
  std::iota(order.begin(), order.end(), size_t{0});
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return x[a] < x[b]; });
  std::vector<double> r(x.size());
  for (size_t i = 0; i < order.size();) {
    size_t j = i;
    while (j + 1 < order.size() && x[order[j + 1]] == x[order[i]]) ++j;
    const double average = (static_cast<double>(i) + static_cast<double>(j)) / 2.0 + 1.0;
    for (size_t k = i; k <= j; ++k) r[order[k]] = average;
    i = j + 1;
  }
  return r;
}

// The identity of a search, which names its journal (search_journal.h): the
// scenario and every constraint that changes what a simulation gives.
uint64_t search_hash(const SearchOptions& o, const scenario::Scenario& base) {
  // Deterministic serialization: map fields in key order, so the same
  // scenario gives the same hash in every run.
  std::string key;
  {
    google::protobuf::io::StringOutputStream stream(&key);
    google::protobuf::io::CodedOutputStream coded(&stream);
    coded.SetSerializationDeterministic(true);
    base.SerializeToCodedStream(&coded);
  }
  for (const std::string& f : o.fixes) key += "\n--fix " + f;
  if (o.gpus) key += fmt::format("\n--gpus {}..{}", o.gpus->lo, o.gpus->hi);
  key += fmt::format("\n--max-memory-gb {}\n--network {}", o.max_memory_gb,
                     o.network == run::NetworkMode::kFlow ? "flow" : "analytic");
  // A profile's measurements, not its path, make the simulations what they are.
  if (o.calibration.enabled()) key += "\n--calibration " + read_input_file(o.calibration.profile, kProfileInput);
  return fnv1a64(key);
}

}  // namespace

std::optional<double> spearman(const std::vector<double>& a, const std::vector<double>& b) {
  if (a.size() != b.size() || a.size() < 3) return std::nullopt;
  const std::vector<double> ra = ranks_of(a), rb = ranks_of(b);
  const double n = static_cast<double>(a.size());
  const double mean = (n + 1) / 2;
  double sab = 0, saa = 0, sbb = 0;
  for (size_t i = 0; i < ra.size(); ++i) {
    sab += (ra[i] - mean) * (rb[i] - mean);
    saa += (ra[i] - mean) * (ra[i] - mean);
    sbb += (rb[i] - mean) * (rb[i] - mean);
  }
  if (saa == 0 || sbb == 0) return std::nullopt;
  return sab / std::sqrt(saa * sbb);
}

SearchResult run_search(const SearchOptions& o, const parallel::World& world, const SearchProgress& progress,
                        const SearchEstimated& on_estimate) {
  SearchResult result;
  result.processes = world.size;
  result.threads = resolve_jobs(o.jobs);
  const auto t0 = Clock::now();
  const scenario::LoadedScenario base = scenario::load_scenario(o.scenario, 1, o.edits);
  result.scenario_name = base.spec.name();
  result.gpus_per_node = base.spec.cluster().gpus_per_node();
  result.moe = base.spec.model().llm().moe().num_experts() > 0;
  result.gpu_count_free = o.gpus.has_value() && o.gpus->lo != o.gpus->hi;
  if (o.gpus) result.constraints.push_back(fmt::format("--gpus {}..{}", o.gpus->lo, o.gpus->hi));
  for (const std::string& f : o.fixes) result.constraints.push_back("--fix " + f);
  if (o.max_memory_gb > 0) result.constraints.push_back(fmt::format("--max-memory-gb {}", o.max_memory_gb));
  if (o.calibration.enabled()) {
    // Read, validated and matched to the scenario's GPU before anything runs.
    (void)run::make_cost_model(o.calibration, base.spec.cluster(), base.spec.training().precision(), o.scenario);
    result.constraints.push_back("--calibration " + o.calibration.profile);
  }
  const int64_t hbm = cost::hbm_capacity_bytes(base.spec.cluster()).count();
  result.memory_limit_bytes = o.max_memory_gb > 0 ? static_cast<int64_t>(o.max_memory_gb * 1e9) : hbm;
  const int64_t limit = result.memory_limit_bytes > 0 ? result.memory_limit_bytes : INT64_MAX;
  // Placements that put the encoder on GPUs of its own (non-colocated
  // islands, derived on top of the LLM's nodes) must still fit the budget.
  result.gpu_budget = o.gpus ? o.gpus->hi : scenario::num_gpus(base.spec);
  const int64_t budget = result.gpu_budget;

  const std::vector<Placement> placements = scenario_placements(base);
  const Dimensions dims = make_dimensions(base.spec, o.gpus, o.fixes, placements);
  const std::vector<Plan> plans = enumerate_plans(base.spec, dims, result.constraints);
  result.timings.enumerate_s = seconds_since(t0);

  // Screen: validity, then the estimate and the memory limit.
  const auto t1 = Clock::now();
  const PlanShape shape = plan_shape(base.spec);
  ScreenPool pool(base.spec);
  const size_t chunks = (plans.size() + kScreenChunk - 1) / kScreenChunk;
  std::vector<std::string> screened = parallel::map_items(
      world, chunks, result.threads,
      [&](size_t c) {
        std::unique_ptr<Screen> screen = pool.take();
        const size_t begin = c * kScreenChunk, end = std::min(plans.size(), begin + kScreenChunk);
        std::string out((end - begin) * sizeof(ScreenRecord), '\0');
        for (size_t i = begin; i < end; ++i) {
          ScreenRecord r;
          Fate fate = check_plan(shape, plans[i]);
          if (fate == Fate::kScreened) {
            const ScreenEstimate e = screen->estimate(plans[i]);
            r.iteration_s = e.iteration_s;
            r.tokens_per_s = e.tokens_per_s;
            r.mfu = e.mfu;
            r.bubble_s = e.bubble_s;
            r.exposed_comm_s = e.exposed_comm_s;
            r.gpus = e.gpus;
            r.memory = e.memory.count();
            r.memory_lower_bound = e.memory_lower_bound.count();
            if (r.memory_lower_bound > limit) {
              fate = Fate::kOverMemoryBound;
            } else if (r.memory > limit) {
              fate = Fate::kOverMemoryEstimate;
            } else if (r.gpus > budget) {
              fate = Fate::kOverGpuBudget;
            }
          }
          r.fate = static_cast<int8_t>(fate);
          std::memcpy(out.data() + (i - begin) * sizeof(ScreenRecord), &r, sizeof r);
        }
        pool.give(std::move(screen));
        return out;
      },
      {},
      [&](size_t done, size_t owned, size_t, const std::string&) {
        if (progress) progress("screen", done, owned, 0);
      });
  result.timings.screen_s = seconds_since(t1);

  // The root decides which plans to simulate, and tells the others.
  std::string chosen_text;
  if (world.root()) {
    result.candidates.resize(plans.size());
    for (size_t c = 0; c < screened.size(); ++c) {
      const size_t begin = c * kScreenChunk;
      for (size_t k = 0; k * sizeof(ScreenRecord) < screened[c].size(); ++k) {
        ScreenRecord r;
        std::memcpy(&r, screened[c].data() + k * sizeof(ScreenRecord), sizeof r);
        Candidate& cand = result.candidates[begin + k];
        cand.plan = plans[begin + k];
        cand.fate = static_cast<Fate>(r.fate);
        if (!is_pruned(cand.fate) || cand.fate == Fate::kOverMemoryBound) {  // the screen ran
          ++result.timings.screened;
          cand.screen.iteration_s = r.iteration_s;
          cand.screen.tokens_per_s = r.tokens_per_s;
          cand.screen.mfu = r.mfu;
          cand.screen.bubble_s = r.bubble_s;
          cand.screen.exposed_comm_s = r.exposed_comm_s;
          cand.screen.gpus = r.gpus;
          cand.screen.memory = Bytes(r.memory);
          cand.screen.memory_lower_bound = Bytes(r.memory_lower_bound);
        }
      }
    }
    std::vector<size_t> pool_ids;
    for (size_t i = 0; i < result.candidates.size(); ++i)
      if (result.candidates[i].fate == Fate::kScreened) pool_ids.push_back(i);
    std::stable_sort(pool_ids.begin(), pool_ids.end(), [&](size_t a, size_t b) {
      return result.candidates[a].screen.tokens_per_s > result.candidates[b].screen.tokens_per_s;
    });
    pool_ids.resize(std::min<size_t>(pool_ids.size(), static_cast<size_t>(std::max(0, o.simulate_top))));
    std::sort(pool_ids.begin(), pool_ids.end());
    for (size_t id : pool_ids) chosen_text += std::to_string(id) + "\n";
  }
  screened.clear();
  chosen_text = parallel::broadcast_from_root(world, chosen_text);
  std::vector<size_t> chosen;
  {
    std::istringstream in(chosen_text);
    for (size_t id; in >> id;) chosen.push_back(id);
  }

  // Simulate the chosen plans (those the journal does not already hold).
  const auto t2 = Clock::now();
  const uint64_t hash = search_hash(o, base.spec);
  // Each process keeps its own journal (the root's is the one named, the
  // others add ".<rank>"); a resumed search reads them all, so every process
  // skips the same plans.
  const std::vector<std::string> journals = journal_paths(o.journal, world.size);
  std::map<size_t, std::string> own;
  std::map<size_t, std::string> journaled =
      o.resume ? read_journals(kSearchJournal, journals, hash, plans.size(), check_record, world.rank, &own)
               : std::map<size_t, std::string>{};
  std::vector<size_t> to_run;
  for (size_t id : chosen)
    if (!journaled.count(id)) to_run.push_back(id);
  std::vector<double> costs;
  // A folded run simulates one rank per pipeline stage, so its events grow
  // with the microbatches times all the layers; the heterogeneous
  // placements simulate several layouts while choosing one.
  for (size_t id : to_run) {
    const Plan& p = plans[id];
    const double microbatches = static_cast<double>(shape.global_batch) / (double(p.micro_batch) * double(p.dp));
    const bool hetero = p.placement == Placement::kHeteroColocated || p.placement == Placement::kHeteroNonColocated;
    costs.push_back(microbatches * double(shape.layers) * (hetero ? 10.0 : 1.0));
  }
  // Before the first simulation: the plans most likely to be the largest
  // (by the events proxy above, and by GPUs, which size the flow network)
  // compiled and their runs estimated, the batch checked against this
  // machine's memory (docs/performance.md#batch-estimate). The sampled
  // plans are kept for their runs (under MPI, a plan kept on one process and
  // run on another is compiled again there).
  const Bytes host_limit = run::memory_limit_from_gb(o.max_host_memory_gb);
  std::vector<double> gpus;
  for (size_t id : to_run) gpus.push_back(static_cast<double>(plans[id].gpus(result.gpus_per_node)));
  const std::vector<size_t> sample =
      run::estimate_sample({costs, gpus}, to_run.size(), static_cast<size_t>(std::max(4, result.threads)));
  run::PreparedSlots<PreparedPlan> slots(to_run.size(), run::prepared_budget(host_limit));
  std::vector<double> sample_costs;  // for the work split
  for (size_t k : sample) sample_costs.push_back(costs[k]);
  const std::vector<std::string> estimated = parallel::map_items(
      world, sample.size(), result.threads,
      [&](size_t i) {
        return estimate_plan(base, plans[to_run[sample[i]]], o.network, o.calibration, sample[i], slots);
      },
      sample_costs,
      [&](size_t done, size_t owned, size_t, const std::string&) {
        if (progress) progress("compile", done, owned, 0);
      });
  std::string refusal;
  if (world.root() && !to_run.empty()) {
    result.estimate =
        run::estimate_sampled_batch(estimated, sample, costs, result.threads, world.size, o.network, /*folded=*/true);
    try {
      run::check_batch_memory(*result.estimate, run::resident_bytes(), host_limit, "--max-host-memory-gb",
                              "plans", "a smaller ‹simulate›");
    } catch (const Error& e) {
      if (world.size == 1) throw;
      refusal = e.raw();
    }
    if (on_estimate) on_estimate(*result.estimate);
  }
  refusal = parallel::broadcast_from_root(world, refusal);
  if (!refusal.empty()) throw Error(refusal);
  result.timings.compile_s = seconds_since(t2);
  // The journal is (re)written only once the batch is accepted: a refused
  // search leaves nothing behind.
  std::optional<JournalLog> journal;
  if (!journals.empty()) journal.emplace(kSearchJournal, journals[static_cast<size_t>(world.rank)], hash, own);
  const auto t3 = Clock::now();
  double best = 0;
  const std::vector<std::string> simulated = parallel::map_items(
      world, to_run.size(), result.threads,
      [&](size_t k) {
        std::string record = simulate_plan(base, plans[to_run[k]], o.network, o.calibration, slots.take(k));
        if (journal) journal->append(to_run[k], record);
        return record;
      },
      costs,
      [&](size_t done, size_t owned, size_t, const std::string& record) {
        const nlohmann::json j = nlohmann::json::parse(record);
        if (j.contains("tokens_per_s")) best = std::max(best, j["tokens_per_s"].get<double>());
        if (progress) progress("simulate", done, owned, best);
      });
  result.timings.simulate_s = seconds_since(t3);
  if (!world.root()) return result;

  for (size_t k = 0; k < to_run.size(); ++k) journaled[to_run[k]] = simulated[k];
  std::set<size_t> fresh(to_run.begin(), to_run.end());
  for (size_t id : chosen) {
    Candidate& c = result.candidates[id];
    Simulated s = parse_record(journaled.at(id), SourceLocation{o.journal, 0, 0, {}});
    s.resumed = !fresh.count(id);
    if (!s.problem.empty()) {
      c.fate = Fate::kCompileFailed;
    } else {
      c.fate = s.peak_memory_bytes > limit ? Fate::kOverMemoryCompiled
               : s.gpus > budget           ? Fate::kOverGpuBudget
                                           : Fate::kSimulated;
      result.ranking.push_back(id);
    }
    c.simulated = std::make_shared<const Simulated>(std::move(s));
  }
  std::stable_sort(result.ranking.begin(), result.ranking.end(), [&](size_t a, size_t b) {
    const auto& x = *result.candidates[a].simulated;
    const auto& y = *result.candidates[b].simulated;
    const bool fx = result.candidates[a].fate == Fate::kSimulated, fy = result.candidates[b].fate == Fate::kSimulated;
    if (fx != fy) return fx;  // plans that fit first
    return x.tokens_per_s > y.tokens_per_s;
  });
  std::vector<double> screen_tps, sim_tps;
  for (size_t id : result.ranking) {
    screen_tps.push_back(result.candidates[id].screen.tokens_per_s);
    sim_tps.push_back(result.candidates[id].simulated->tokens_per_s);
  }
  result.rank_correlation = spearman(screen_tps, sim_tps);
  for (const Candidate& c : result.candidates) ++result.fate_counts[static_cast<size_t>(c.fate)];
  return result;
}

}  // namespace lacuna::search
