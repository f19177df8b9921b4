// libFuzzer target: `lacuna import hf` on a config.json, then the imported
// scenario written and read back with every validation rule, as the command
// does before it writes anything.
#include <cstddef>
#include <cstdint>
#include <string>

#include "sim/core/error.h"
#include "sim/importer/hf_import.h"
#include "sim/scenario/scenario.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    const lacuna::importer::ConfigFile config{std::string(reinterpret_cast<const char*>(data), size), "config.json"};
    const lacuna::importer::Annotated a = lacuna::importer::import_hf(config, lacuna::importer::HfOptions{});
    (void)lacuna::scenario::parse_scenario(lacuna::importer::write_annotated(a), lacuna::scenario::Format::kText,
                                           "imported.pbtxt");
  } catch (const lacuna::Error&) {
  }
  return 0;
}
