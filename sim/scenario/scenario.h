// Loading a scenario file: parse (.pbtxt text format or .json), resolve the
// hardware preset, validate. Every problem is a lacuna::Error naming file,
// line, field, what is wrong and what would fix it.
#pragma once

#include <map>
#include <string>
#include <string_view>

#include "sim/core/error.h"
#include "sim/proto/scenario.pb.h"

namespace lacuna::scenario {

// Where each field of a parsed file stands, by dotted path ("parallel.tp",
// "cluster.gpu.efficiency[GEMM].flops", "parallel.layers_per_stage[3]").
class SourceMap {
 public:
  void add(const std::string& field_path, int line, int column);
  // The location of `field_path`, or of its nearest ancestor that appears in the
  // file (a missing field is reported where its parent message is); file-only
  // location when nothing matches.
  SourceLocation locate(const std::string& field_path) const;
  void set_file(std::string file) { file_ = std::move(file); }
  const std::string& file() const { return file_; }

 private:
  std::string file_;
  std::map<std::string, std::pair<int, int>> where_;
};

enum class Format { kText, kJson };

struct LoadedScenario {
  Scenario spec;       // preset resolved into spec.cluster; validated
  std::string path;    // as given by the user
  SourceMap locations;
};

// Reads, parses, resolves presets and validates. Format by extension:
// .json → JSON, anything else (.pbtxt, .textproto, .txtpb) → text format.
LoadedScenario load_scenario(const std::string& path);
LoadedScenario parse_scenario(std::string_view text, Format format, const std::string& display_name);

// The built-in hardware presets by name ("a100-80gb-sxm", "h100-sxm",
// "h200-sxm"); throws lacuna::Error for an unknown name.
const Cluster& hardware_preset(const std::string& name);
std::vector<std::string> hardware_preset_names();

// Peak FLOP/s of the GPU at a precision (throws if the preset lacks it).
double peak_flops_per_s(const GpuSpec& gpu, Precision precision);

}  // namespace lacuna::scenario
