#include "tools/cli/output_checks.h"

namespace lacuna::cli {

CLI::Validator output_file() {
  return CLI::Validator(
      [](std::string& value) -> std::string {
        return value.empty() ? "the output path is empty: give a file name, or leave the option out" : "";
      },
      "FILE");
}

}  // namespace lacuna::cli
