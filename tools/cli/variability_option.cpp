#include "tools/cli/variability_option.h"

#include <charconv>
#include <system_error>

#include "sim/core/error.h"
#include "sim/scenario/variability.h"

namespace lacuna::cli {

void add_set_option(CLI::App* sub, scenario::ScenarioEdits& edits) {
  sub->add_option("--set", edits.set,
                  "override a scenario field, checked like the file: a dotted path with [i] for list entries and "
                  "[KEY] for map entries, e.g. --set parallel.dp=64 --set cluster.nic.bandwidth_gb_per_s=25 "
                  "(repeatable)")
      ->type_name("FIELD=VALUE")
      ->take_all();
}

void add_variability_options(CLI::App* sub, scenario::ScenarioEdits& edits) {
  sub->add_flag("--ideal", edits.ideal,
                "the ideal cluster: every source of variability off (the preset's defaults too); "
                "--straggler, --slow-link and --set still add to it (docs/variability.md)");
  sub->add_option("--seed", edits.seed, "seed of the variability's counter-based RNG (default: the scenario's, else 0)")
      ->type_name("S")
      ->check(CLI::Validator(
          [](std::string& text) -> std::string {
            // CLI11 alone would take "1e3" and saturate values past the range.
            int64_t value = 0;
            const char* end = text.data() + text.size();
            const auto [ptr, ec] = std::from_chars(text.data(), end, value);
            if (text.empty() || ec != std::errc() || ptr != end || value < 0) {
              return "expected an integer from 0 to 9223372036854775807 (2^63 - 1), got '" + text + "'";
            }
            return {};
          },
          "INT64"));
  sub->add_option("--straggler", edits.stragglers,
                  "host NODE's compute runs FACTOR times longer, e.g. host=17:1.10 (repeatable)")
      ->type_name("host=NODE:FACTOR")
      ->take_all();
  sub->add_option("--slow-link", edits.slow_links,
                  "a link at a fraction of its bandwidth: node=N,nic=K[,dir=up|down]:FACTOR, or node=N,gpu=G:FACTOR "
                  "for a GPU's NVLink, e.g. node=12,nic=3:0.5 (repeatable; needs --network flow)")
      ->type_name("SPEC")
      ->take_all();
  add_set_option(sub, edits);
}

}  // namespace lacuna::cli
