// Loading a scenario file: parse (.pbtxt text format or .json), resolve the
// hardware preset, validate. Every problem is a lacuna::Error naming file,
// line, field, what is wrong and what would fix it.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "sim/core/error.h"
#include "sim/proto/scenario.pb.h"

namespace lacuna::scenario {

// Where each field of a parsed file stands, by dotted path ("parallel.tp",
// "cluster.gpu.efficiency[GEMM].flops", "parallel.layers_per_stage[3]").
class SourceMap {
 public:
  void add(const std::string& field_path, int line, int column);
  // The field was set (or replaced) by a caller's option, not the file:
  // locate() names `flag` (an option reference, option_text.h, e.g.
  // option_ref("set", "parallel.dp=64")) for it and for every field inside it.
  void set_origin(const std::string& field_path, const std::string& flag);
  // Whether a located field came from a flag (set_origin), and every flag given.
  bool from_flag(const SourceLocation& where) const;
  const std::vector<std::string>& flags() const { return flags_; }
  // The location of `field_path`, or of its nearest ancestor that appears in the
  // file (a missing field is reported where its parent message is); file-only
  // location when nothing matches.
  SourceLocation locate(const std::string& field_path) const;
  // Whether the field itself was written in the file or set by a flag (its
  // parent alone does not count): a written 0 is the user's value, not unset.
  bool written(const std::string& field_path) const {
    return where_.count(field_path) > 0 || origin_.count(field_path) > 0;
  }
  void set_file(std::string file) { file_ = std::move(file); }
  const std::string& file() const { return file_; }

 private:
  std::string file_;
  std::map<std::string, std::pair<int, int>> where_;
  std::map<std::string, std::string> origin_;  // field path → flag
  std::vector<std::string> flags_;
};

enum class Format { kText, kJson };

// One default the loader filled in: the field, its value, and why that value.
struct FilledDefault {
  std::string field;
  std::string value;
  std::string why;
};

struct LoadedScenario {
  Scenario spec;       // preset resolved into spec.cluster; validated
  std::string path;    // as given by the user
  SourceMap locations;
  // The --scale-down factor applied to `spec` (sim/scenario/scale_down.h);
  // 1: the file's sizes as written.
  int64_t scale_down = 1;
  // The fields left unset in the file that took their documented default
  // (defaults.h, docs/scenario.md#defaults), in the order filled.
  std::vector<FilledDefault> defaults;
};

// Reads, parses, resolves presets and validates. Format by extension:
// .json → JSON, anything else (.pbtxt, .textproto, .txtpb) → text format.
// `scale_down` > 1 first validates the file as written, then divides its
// hidden sizes and sequence lengths (scale_down.h) and validates again; an
// error of that second pass starts "after --scale-down N: ".
// `edits` (edits.h: --set, --ideal, --seed, --straggler, --slow-link) apply
// to the file as parsed, before presets and validation.
struct ScenarioEdits;
LoadedScenario load_scenario(const std::string& path, int64_t scale_down = 1);
LoadedScenario load_scenario(const std::string& path, int64_t scale_down, const ScenarioEdits& edits);
LoadedScenario parse_scenario(std::string_view text, Format format, const std::string& display_name,
                              int64_t scale_down = 1);
LoadedScenario parse_scenario(std::string_view text, Format format, const std::string& display_name,
                              int64_t scale_down, const ScenarioEdits& edits);

// The built-in hardware presets by name ("a100-80gb-sxm", "h100-sxm",
// "h200-sxm"); throws lacuna::Error for an unknown name.
const Cluster& hardware_preset(const std::string& name);
std::vector<std::string> hardware_preset_names();

// A preset's GPU with the kernel model lacuna shipped before its efficiencies
// were fitted to measured kernels (docs/cost-model.md#fitted-to-measured-
// kernels): GEMM efficiency from one best-case GEMM, memory-bound classes at
// assumed fractions of HBM bandwidth. For the "before" column of `lacuna
// validate` only; throws lacuna::Error for an unknown name.
GpuSpec best_case_kernel_model(const std::string& preset);

// `gpu` with the kernel model fields of `model` (efficiencies and the shape
// model's GEMM parameters) written over it: what `best_case_kernel_model`
// changes, applied to a scenario's own GPU.
void apply_kernel_model(GpuSpec& gpu, const GpuSpec& model);

// The variability defaults of a hardware preset (docs/variability.md; every
// figure's source in presets.cpp); empty name: nothing (every source off).
Variability variability_preset(const std::string& hardware_preset_name);

// Peak FLOP/s of the GPU at a precision (throws if the preset lacks it).
double peak_flops_per_s(const GpuSpec& gpu, Precision precision);

// ---- derived quantities of a validated scenario

// Validation alone, for scenarios built in code (load_scenario already runs it).
// `locations` may be empty.
void validate_scenario(const Scenario& spec, const SourceMap& locations);

int64_t num_gpus(const Scenario& spec);          // num_nodes × gpus_per_node
int64_t num_microbatches(const Scenario& spec);  // per pipeline: global / (micro × dp)
// The rank order, with "" replaced by Megatron-LM's default "tp-cp-dp-pp".
std::string effective_rank_order(const ParallelPlan& plan);
// Layers of each of the pp × virtual_stages virtual stages, in pipeline order
// (the even split when layers_per_stage is empty).
std::vector<int64_t> layers_per_virtual_stage(const Scenario& spec);

// Efficiency of an op class ("GEMM", ...): each subfield from the class's map
// entry, else from "DEFAULT". Validation guarantees DEFAULT has both.
struct OpEfficiency {
  double flops = 0;
  double memory = 0;
};
OpEfficiency op_efficiency(const GpuSpec& gpu, const std::string& op_class);

}  // namespace lacuna::scenario
