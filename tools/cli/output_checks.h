// Output paths checked when options are parsed and before a run starts
// (sim/core/output_path.h): every command's FILE options go through these.
#pragma once

#include <CLI/CLI.hpp>

#include "sim/core/output_path.h"

namespace lacuna::cli {

// Refuses an explicitly empty FILE (`--json ""` would otherwise mean "no
// JSON" and exit 0 having written nothing).
CLI::Validator output_file();

}  // namespace lacuna::cli
