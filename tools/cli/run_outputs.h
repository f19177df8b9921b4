// The files `lacuna simulate` and `lacuna execute` write about one iteration:
// the Perfetto trace, the SVG and the JSON summary (with its per-op timeline).
// Both commands share the options, the default paths, the observers that
// build the files, and the rule that a file appears under its name only once
// the run succeeded (docs/outputs.md).
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <CLI/CLI.hpp>

#include "sim/core/atomic_file.h"
#include "sim/core/output_path.h"
#include "sim/engine/observer.h"
#include "sim/proto/program.pb.h"
#include "sim/proto/trace.pb.h"
#include "sim/report/formats/pipeline_svg.h"
#include "sim/report/analyses/rank_spec.h"
#include "sim/report/analyses/summary.h"
#include "sim/report/observers/timeline.h"
#include "sim/report/formats/trace_writer.h"

namespace lacuna::cli {

struct OutputOptions {
  std::string json;
  std::string trace;
  std::string svg;
  std::string spans;  // the span trace (trace.proto)
  std::string trace_ranks = "pipeline";
  std::string out_dir = "lacuna-out";
  bool no_trace = false;
  bool no_svg = false;
};

// --json, --trace, --svg, --spans, --trace-ranks, --out-dir, --no-trace, --no-svg.
// `suffix` names the default files: DIR/<scenario><suffix>.trace.json and
// DIR/<scenario><suffix>.svg ("" for simulate, ".measured" for execute).
void add_output_options(CLI::App* sub, OutputOptions& options, std::string_view suffix);

// The paths given on the command line (defaults need the scenario's name),
// for a check before the input is even loaded.
std::vector<NamedPath> explicit_outputs(const OutputOptions& options);

class RunOutputs {
 public:
  // Parses --trace-ranks (a bad selection fails here, before any run),
  // creates the output directory if a default path needs it and opens every
  // file under a temporary name. `enabled` false writes nothing at all.
  // Every output path (these, defaults included, and `other_outputs`) is
  // checked against the others and against `inputs` first (check_outputs).
  // `origin` tags the span trace: a prediction (simulate) or a measurement
  // (execute).
  RunOutputs(const ir::Program& program, const OutputOptions& options, const std::string& stem,
             std::string_view suffix, trace::Origin origin, bool enabled = true, const std::vector<NamedPath>& other_outputs = {},
             const std::vector<NamedPath>& inputs = {});

  const report::RankSpec& spec() const { return spec_; }
  // Attach these to the run (trace, SVG, timeline: those that are written).
  std::vector<engine::Observer*> observers();
  // Null without a trace; the flow network draws link counters through it.
  report::TraceWriter* trace() { return trace_ ? &*trace_ : nullptr; }

  // After the run: the summary gains the program's digest and the timeline
  // (when JSON or spans are written), the SVG, JSON and span trace are
  // written, and every file is renamed into place.
  void commit(report::Summary& summary);
  // "\n  trace  PATH  (N ranks; …)\n  svg    …\n  json   …\n", or "" when
  // nothing was written.
  std::string describe() const;

 private:
  const ir::Program* program_ = nullptr;
  trace::Origin origin_ = trace::ORIGIN_UNSPECIFIED;
  report::RankSpec spec_;
  std::string trace_path_, svg_path_, json_path_, spans_path_;
  std::optional<report::TraceWriter> trace_;
  std::optional<report::PipelineSvg> svg_;
  std::optional<report::TimelineRecorder> timeline_;
  std::optional<AtomicFile> svg_file_, json_file_, spans_file_;
};

}  // namespace lacuna::cli
