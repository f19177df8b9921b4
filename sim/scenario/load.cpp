#include <filesystem>

#include "sim/core/option_text.h"
#include "sim/core/input_file.h"
#include "sim/scenario/defaults.h"
#include "sim/scenario/edits.h"
#include "sim/scenario/parse.h"
#include "sim/scenario/resolve.h"
#include "sim/scenario/scale_down.h"
#include "sim/scenario/variability.h"

namespace lacuna::scenario {

namespace {

// Far above any real scenario; keeps a wrong path (a dataset, a binary) from
// being read into memory whole.

bool only_whitespace_or_comments(std::string_view text, Format format) {
  bool in_comment = false;
  for (char ch : text) {
    if (in_comment) {
      in_comment = ch != '\n';
      continue;
    }
    if (format == Format::kText && ch == '#') {
      in_comment = true;
      continue;
    }
    if (ch != ' ' && ch != '\t' && ch != '\n' && ch != '\r') return false;
  }
  return true;
}

bool has_json_extension(const std::string& path) {
  auto ext = std::filesystem::path(path).extension().string();
  for (auto& ch : ext) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  return ext == ".json";
}

// Scales a validated scenario and validates the result. The file's values
// passed validation, so a problem now comes from the scaling: the error says
// so and names the factors that would work.
void apply_scale_down(LoadedScenario& s, int64_t factor) {
  const Scenario unscaled = s.spec;
  scale_down(s.spec, factor, s.locations);
  try {
    validate_scenario(s.spec, s.locations);
  } catch (const Error& e) {
    const int64_t largest = largest_scale_down(unscaled);
    const std::string instead = largest > 1 ? option_ref("scale-down", std::to_string(largest)) +
                                                  " is the largest factor this scenario takes"
                                            : "no factor above 1 keeps this scenario valid; run it unscaled";
    throw Error(e.where(), "after " + option_ref("scale-down", std::to_string(factor)) + ": " + e.problem(),
                e.fix().empty() ? instead : e.fix() + "; or: " + instead);
  }
  s.scale_down = factor;
}

void check_factor(int64_t factor) {
  if (factor < 1)
    throw Error(SourceLocation{{}, 0, 0, "‹scale-down›"}, "must be ≥ 1, got " + std::to_string(factor),
                "use 1 (or omit it) for the scenario as written, 2 to halve hidden sizes and sequence lengths");
}

}  // namespace

LoadedScenario parse_scenario(std::string_view text, Format format, const std::string& display_name,
                              int64_t scale_down, const ScenarioEdits& edits) {
  check_factor(scale_down);
  LoadedScenario out;
  out.path = display_name;
  out.locations.set_file(display_name);
  if (only_whitespace_or_comments(text, format))
    throw Error(SourceLocation{display_name, 0, 0, {}}, "the scenario file is empty",
                "start from scenarios/llm/gpt-1.3b-8gpu.pbtxt; see docs/scenario.md");
  check_utf8(text, out.locations);
  Scenario raw = format == Format::kJson ? parse_json_format(text, out.locations)
                                         : parse_text_format(text, out.locations);
  if (!edits.empty()) apply_edits(raw, edits, out.locations);
  try {
    out.spec = raw;
    *out.spec.mutable_cluster() = resolve_cluster(raw.cluster(), out.locations);
    *out.spec.mutable_variability() = resolve_variability(raw.variability(), raw.cluster().preset());
    out.defaults = apply_defaults(out.spec, out.locations);
    validate_scenario(out.spec, out.locations);
    if (scale_down > 1) apply_scale_down(out, scale_down);
  } catch (const Error& e) {
    // A rule the edited scenario breaks at a field of the file: say which
    // flags were in force.
    if (out.locations.flags().empty() || out.locations.from_flag(e.where())) throw;
    std::string flags;
    for (const std::string& f : out.locations.flags()) flags += (flags.empty() ? "" : ", ") + f;
    throw Error(e.where(), e.problem() + " (with " + flags + ")", e.fix());
  }
  return out;
}

LoadedScenario load_scenario(const std::string& path, int64_t scale_down, const ScenarioEdits& edits) {
  check_factor(scale_down);
  const std::string text = read_input_file(path, kScenarioInput);
  return parse_scenario(text, has_json_extension(path) ? Format::kJson : Format::kText, path, scale_down, edits);
}

LoadedScenario load_scenario(const std::string& path, int64_t scale_down) {
  return load_scenario(path, scale_down, ScenarioEdits{});
}

LoadedScenario parse_scenario(std::string_view text, Format format, const std::string& display_name,
                              int64_t scale_down) {
  return parse_scenario(text, format, display_name, scale_down, ScenarioEdits{});
}

}  // namespace lacuna::scenario
