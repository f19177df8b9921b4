// Before a batch of runs (a sweep's points, a search's simulated plans):
// what the batch will cost, from a sample of its items compiled but not yet
// simulated, and the refusal when the runs in flight at once would not fit
// in this machine's memory (docs/performance.md#batch-estimate). A batch
// that would exhaust the machine stops before its first simulation with a
// message naming the option, not an hour later with std::bad_alloc or the
// OOM killer.
//
// Why a sample: compiling every item first costs more than the compile
// itself. Measured on a GPT-3 search (50 plans, -j 1), compiling all first
// and keeping the programs took 6.5 s + 7.9 s against 8.8 s for compile and
// run together, and 1.9 GB against 0.29 GB: the kept programs are fresh
// pages, and this VM's page faults are dear. So the estimate compiles the
// items most likely to be the largest (by each cost proxy the caller gives),
// keeps those for their runs, and scales their events and compile times to
// the whole batch by the proxy.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "sim/core/units.h"
#include "sim/run/network_setup.h"
#include "sim/run/run_estimate.h"
#include "sim/run/simulation_run.h"

namespace lacuna::run {

// One item of the batch, compiled: what its run will add (RunEstimate), and
// what its compile cost here.
struct ItemEstimate {
  bool compiled = false;   // false: the item failed to compile (its run reports why)
  uint64_t events = 0;     // RunEstimate::events
  uint64_t host_events = 0;
  Bytes program;           // the compiled program and its cost model, held during the run
  Bytes run;               // RunEstimate::total()
  double compile_s = 0;    // wall time of the compile here (the time estimate only)
  bool kept = false;       // the compiled item is kept for its run (PreparedSlots)
};

// The record an item's estimate travels in between processes (fixed size).
std::string encode_item_estimate(const ItemEstimate& e);
ItemEstimate decode_item_estimate(const std::string& record);

// Whole-run events per second of `lacuna simulate` on the 2-core development
// VM (Release build, `--no-trace --no-svg`, 2026-12-03;
// docs/performance.md#batch-estimate):
// - full rank: GPT-3 175B on 3,072 H100, 16,330,499 events, 7.94 s with the
//   flow network and 3.73 s with the analytic one;
// - folded (a few ranks simulated, the setup weighs more per event): the
//   slowest of four shipped scenarios (GPT-3 3,072, Llama-2 70B 1,024,
//   MegaScale 175B 3,072, Optimus ViT-22B + GPT-175B 3,072), 0.47 M events/s
//   with the flow network (up to 0.76 M) and 0.59 M with the analytic one
//   (up to 1.02 M).
// The events a run processes are counted exactly before it runs; these rates
// make them a time good to about a factor of two.
inline constexpr double kFlowEventsPerSecond = 2.0e6;
inline constexpr double kAnalyticEventsPerSecond = 4.3e6;
inline constexpr double kFoldedFlowEventsPerSecond = 0.47e6;
inline constexpr double kFoldedAnalyticEventsPerSecond = 0.59e6;

double events_per_second(NetworkMode network, bool folded);

struct BatchEstimate {
  size_t items = 0;        // to run
  size_t sampled = 0;      // compiled for the estimate (the rest by proxy)
  size_t failed = 0;       // of the sampled, failed to compile
  int concurrent = 1;      // items in flight at once in one process (its threads)
  int processes = 1;
  // Over the batch: the sample's, scaled by the proxy (exact when every item
  // was sampled).
  uint64_t events = 0, host_events = 0;
  // The most the items in flight at once can add to this process: the
  // `concurrent` largest sampled items' runs, and their programs where they
  // are not already held (kept items are in the resident set the check
  // reads).
  Bytes in_flight;
  Bytes largest;           // the largest sampled item (program + run)
  double compile_s = 0;    // the compiles the runs will do (items not kept), scaled
  double seconds = 0;      // the batch's estimated wall time (see estimate_batch)
};

// The items to compile for the estimate: for each proxy (a cost per item,
// e.g. events or GPUs), the `per_proxy` items it ranks highest (ties by
// index), their union in index order.
std::vector<size_t> estimate_sample(const std::vector<std::vector<double>>& proxies, size_t items,
                                    size_t per_proxy);

// `sampled`: the sample's estimates; `scale`: the batch's total proxy over
// the sample's (1 when all were sampled). Wall time: the events at the rate
// of their kind of run (events_per_second) plus the compiles not kept,
// spread over processes × threads (at least the longest sampled item).
BatchEstimate estimate_batch(const std::vector<ItemEstimate>& sampled, size_t items, double scale, int threads,
                             int processes, NetworkMode network, bool folded);

// "50 plans (4 compiled for the estimate): 3.1 M events, at most 0.42 GB in
// flight (2 at once), about 12 s on 1 process x 2 threads".
std::string describe_batch(const BatchEstimate& estimate, const std::string& noun);

// Throws lacuna::Error naming `option` when `resident` plus the items in
// flight exceed `limit` (> 0), with the parts and what to do (`fewer`: how
// the command runs fewer items, e.g. "a smaller ‹simulate›").
void check_batch_memory(const BatchEstimate& estimate, Bytes resident, Bytes limit, const std::string& option,
                        const std::string& noun, const std::string& fewer);

// Compiled items kept between the estimate and the run, one slot per item:
// each slot is written by the one thread that estimates its item and taken
// by the one that runs it (parallel::map_items gives an item to one thread),
// so slots need no lock; the byte budget is shared under one.
template <class Prepared>
class PreparedSlots {
 public:
  PreparedSlots(size_t items, Bytes budget) : slots_(items), budget_(budget) {}

  // Keeps `prepared` for item i when `bytes` more fit the budget; says
  // whether it did (when not, the run compiles the item again).
  bool keep(size_t i, std::unique_ptr<Prepared> prepared, Bytes bytes) {
    {
      std::lock_guard<std::mutex> hold(lock_);
      if (Bytes(held_ + bytes) > budget_) return false;
      held_ = held_ + bytes;
    }
    slots_[i] = std::move(prepared);
    return true;
  }
  // Item i's kept compile (null when none); the slot is emptied.
  std::unique_ptr<Prepared> take(size_t i) { return std::move(slots_[i]); }

 private:
  std::vector<std::unique_ptr<Prepared>> slots_;
  Bytes budget_;
  std::mutex lock_;
  Bytes held_ = Bytes::zero();
};

// Fills `e`'s run figures (events, memory) and program size for a compiled
// item, as SimulationRun would run it under `settings`.
void estimate_compiled(const ir::Program& program, const cost::CostModel& cost, const RunSettings& settings,
                       ItemEstimate& e);

// Compiles one item with `prepare` (timed; its errors propagate), estimates
// its run under `settings`, and keeps the compile in `slot` when it fits.
// `Prepared` holds `program` and `cost` (a unique_ptr to the cost model).
template <class Prepared, class Prepare>
ItemEstimate estimate_item(Prepare&& prepare, const RunSettings& settings, size_t slot,
                           PreparedSlots<Prepared>& slots) {
  ItemEstimate e;
  const auto t0 = std::chrono::steady_clock::now();
  std::unique_ptr<Prepared> prepared = prepare();
  e.compile_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  estimate_compiled(prepared->program, *prepared->cost, settings, e);
  e.kept = slots.keep(slot, std::move(prepared), e.program);
  return e;
}

// On the root, from the sample's records (encode_item_estimate), in the
// order of `sample` (indices into the batch): the batch, scaled by `proxy`
// (one cost per item of the batch).
BatchEstimate estimate_sampled_batch(const std::vector<std::string>& records, const std::vector<size_t>& sample,
                                     const std::vector<double>& proxy, int threads, int processes,
                                     NetworkMode network, bool folded);

// The budget of kept compiles (the sample's): a quarter of the memory limit
// (of the default limit when the option's 0 lifts it), so that keeping them
// never decides whether the runs fit.
Bytes prepared_budget(Bytes limit);

}  // namespace lacuna::run
