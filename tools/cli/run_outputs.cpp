#include "tools/cli/run_outputs.h"

#include <filesystem>
#include <system_error>

#include <fmt/format.h>

#include "sim/core/error.h"
#include "sim/ir/digest.h"
#include "sim/report/formats/json_report.h"
#include "sim/report/formats/span_trace.h"
#include "tools/cli/output_checks.h"

namespace lacuna::cli {
namespace {

void ensure_directory(const std::string& dir) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) {
    throw Error(SourceLocation{dir, 0, 0, "--out-dir"}, "cannot create the output directory: " + ec.message());
  }
}

}  // namespace

void add_output_options(CLI::App* sub, OutputOptions& o, std::string_view suffix) {
  const std::string s(suffix);
  sub->add_option("--json", o.json, "write the summary (and the traced ranks' per-op timeline) as JSON to FILE")
      ->check(output_file());
  sub->add_option("--trace", o.trace, "write the Perfetto trace to FILE (default DIR/<scenario>" + s + ".trace.json)")
      ->check(output_file());
  sub->add_option("--svg", o.svg, "write the pipeline picture to FILE (default DIR/<scenario>" + s + ".svg)")
      ->check(output_file());
  sub->add_option("--spans", o.spans,
                  "write the traced ranks' per-op spans as a span trace (trace.proto) to FILE, for `lacuna diff` "
                  "and `lacuna execute --replay-from`")
      ->check(output_file());
  sub->add_option("--trace-ranks", o.trace_ranks,
                  "ranks to draw and keep in the JSON timeline and span trace: pipeline (default), all, a list like "
                  "0-7,64, or stage:N");
  sub->add_option("--out-dir", o.out_dir, "directory for the default trace and SVG (created if missing)")
      ->capture_default_str();
  sub->add_flag("--no-trace", o.no_trace, "do not write the trace");
  sub->add_flag("--no-svg", o.no_svg, "do not write the SVG");
}

std::vector<NamedPath> explicit_outputs(const OutputOptions& o) {
  return {{"--json", o.json},
          {"--trace", o.no_trace ? std::string() : o.trace},
          {"--svg", o.no_svg ? std::string() : o.svg},
          {"--spans", o.spans}};
}

RunOutputs::RunOutputs(const ir::Program& program, const OutputOptions& o, const std::string& stem,
                       std::string_view suffix, trace::Origin origin, bool enabled,
                       const std::vector<NamedPath>& other_outputs, const std::vector<NamedPath>& inputs)
    : program_(&program), origin_(origin), spec_(report::parse_rank_spec(o.trace_ranks, "--trace-ranks")) {
  (void)report::select_ranks(spec_, program);  // a bad selection fails before the run
  if (!enabled) return;
  const std::string base = o.out_dir + "/" + stem + std::string(suffix);
  trace_path_ = o.no_trace ? std::string() : !o.trace.empty() ? o.trace : base + ".trace.json";
  svg_path_ = o.no_svg ? std::string() : !o.svg.empty() ? o.svg : base + ".svg";
  json_path_ = o.json;
  spans_path_ = o.spans;
  if ((!o.no_trace && o.trace.empty()) || (!o.no_svg && o.svg.empty())) ensure_directory(o.out_dir);
  // Every path, defaults included, checked before any file is opened.
  std::vector<NamedPath> outputs = {
      {"--trace", trace_path_}, {"--svg", svg_path_}, {"--json", json_path_}, {"--spans", spans_path_}};
  outputs.insert(outputs.end(), other_outputs.begin(), other_outputs.end());
  check_outputs(outputs, inputs);
  // Opened now so that an unwritable path fails before a long run; each
  // appears under its name only on commit().
  if (!trace_path_.empty()) trace_.emplace(program, trace_path_, spec_);
  if (!svg_path_.empty()) {
    svg_.emplace(program, spec_);
    svg_file_.emplace(svg_path_);
  }
  if (!json_path_.empty() || !spans_path_.empty()) timeline_.emplace(program, spec_);
  if (!json_path_.empty()) json_file_.emplace(json_path_);
  if (!spans_path_.empty()) spans_file_.emplace(spans_path_);
}

std::vector<engine::Observer*> RunOutputs::observers() {
  std::vector<engine::Observer*> out;
  if (trace_) out.push_back(&*trace_);
  if (svg_) out.push_back(&*svg_);
  if (timeline_) out.push_back(&*timeline_);
  return out;
}

void RunOutputs::commit(report::Summary& summary) {
  if (timeline_) {
    // What ran, for `diff` to match runs by (the digest of the program as
    // loaded, whatever digest a .pb declared).
    summary.program_digest = ir::content_digest(*program_);
    summary.timeline = timeline_->timeline();
  }
  if (svg_file_) svg_file_->write(svg_->render());
  if (json_file_) json_file_->write(report::summary_json(summary));
  if (spans_file_) {
    spans_file_->write(report::span_trace_bytes(
        report::make_span_trace(summary, timeline_->timeline(), origin_, summary.program_digest), "--spans"));
  }
  if (trace_) trace_->commit();
  if (svg_file_) svg_file_->commit();
  if (json_file_) json_file_->commit();
  if (spans_file_) spans_file_->commit();
}

std::string RunOutputs::describe() const {
  if (!trace_ && !svg_ && !json_file_ && !spans_file_) return {};
  std::string out = "\n";
  if (trace_) {
    out += fmt::format("  trace  {}  ({} ranks; open the trace at https://ui.perfetto.dev)\n", trace_path_,
                       trace_->traced_ranks().size());
  }
  if (svg_) out += fmt::format("  svg    {}  ({} ranks)\n", svg_path_, svg_->drawn_ranks().size());
  if (json_file_) out += fmt::format("  json   {}\n", json_path_);
  if (spans_file_) out += fmt::format("  spans  {}  ({} ranks)\n", spans_path_, timeline_->timeline().ranks.size());
  return out;
}

}  // namespace lacuna::cli
