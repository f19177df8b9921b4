// libFuzzer target: `lacuna import megatron --from SCRIPT` on a launch
// script's text, then the imported scenario written and read back with every
// validation rule, as the command does before it writes anything.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "sim/core/error.h"
#include "sim/importer/megatron_import.h"
#include "sim/scenario/scenario.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    const auto args =
        lacuna::importer::split_command_line(std::string_view(reinterpret_cast<const char*>(data), size));
    if (args.empty()) return 0;  // the command refuses an empty command line before importing
    const lacuna::importer::Annotated a = lacuna::importer::import_megatron(args, lacuna::importer::MegatronOptions{});
    (void)lacuna::scenario::parse_scenario(lacuna::importer::write_annotated(a), lacuna::scenario::Format::kText,
                                           "imported.pbtxt");
  } catch (const lacuna::Error&) {
  }
  return 0;
}
