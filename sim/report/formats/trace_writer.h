// Chrome / Perfetto trace JSON (--trace), written while the simulation runs
// into a temporary file that only appears under its name on commit(), after the
// run succeeded. Layout (docs/outputs.md): one process per traced rank, one
// thread per stream, "X" slices in µs with exact ns decimals, flow arrows from
// each send to its recv, a memory counter per rank, and (flow network only)
// link utilisation counters under a "network" process (link_counter_trace.h).
// Event records and waits are not drawn.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "sim/core/atomic_file.h"
#include "sim/engine/observer.h"
#include "sim/network/link_observer.h"
#include "sim/proto/program.pb.h"
#include "sim/report/observers/link_counter_trace.h"
#include "sim/report/analyses/rank_spec.h"

namespace lacuna::report {

// Trace name of an op, e.g. "F mb3 c1 L14 qkv", "B mb3 L14 fc2", "AG tp",
// "send→r9 mb3". `rank` resolves peers.
std::string op_name(const ir::Program& program, int32_t rank, const ir::Op& op);

class TraceWriter : public engine::Observer {
 public:
  // Creates the temporary file now (so an unwritable path fails before the run).
  TraceWriter(const ir::Program& program, const std::string& path, RankSpec spec);
  ~TraceWriter() override;

  void on_run_begin(const engine::RunInfo& info) override;
  void on_op_end(const engine::OpSpan& span) override;
  void on_transfer(const engine::OpSpan& send, const engine::OpSpan& recv) override;
  void on_run_end(TimeNs end) override;

  // More events, written by on_run_end before the file is closed (the
  // critical path, docs/critical-path.md#trace): called with the traced
  // ranks and a function that writes one event.
  using Emit = std::function<void(std::string_view)>;
  using Epilogue = std::function<void(const std::vector<int32_t>& traced, const Emit& emit)>;
  void set_epilogue(Epilogue epilogue) { epilogue_ = std::move(epilogue); }

  // Renames the finished file into place. Call once, after on_run_end.
  void commit();
  const std::vector<int32_t>& traced_ranks() const { return traced_; }
  const std::string& path() const { return file_.path(); }
  // Register with the flow network (FlowCommModel::add_link_observer) to draw
  // link utilisation; the pointer lives as long as this writer.
  network::LinkObserver* link_observer() { return &link_counters_; }
  const LinkCounterTrace& link_counters() const { return link_counters_; }

 private:
  void event_prefix();
  void emit(std::string_view event);

  const ir::Program& program_;
  RankSpec spec_;
  AtomicFile file_;
  std::vector<int32_t> traced_;          // simulated ranks drawn, display order
  std::vector<int32_t> slot_of_rank_;    // global rank → index into traced_, -1 if not drawn
  std::vector<int64_t> memory_;          // per traced rank, running bytes
  std::vector<std::string> slot_names_;  // group slot names, JSON-escaped
  LinkCounterTrace link_counters_;
  Epilogue epilogue_;
  int32_t iterations_ = 1;  // RunInfo::iterations
  uint64_t next_flow_ = 1;
  bool first_event_ = true;
  bool finished_ = false;
};

}  // namespace lacuna::report
