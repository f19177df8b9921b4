#pragma once

// lacuna's version (CMake's PROJECT_VERSION), as written into outputs
// (`lacuna info`, compare/sweep JSON, compiled programs, profiles).
//
// It is defined in one source file (version.cpp, whose compile definition
// CMake sets), so that a version change rebuilds that file and relinks, not
// every module (docs/performance.md#build).

namespace lacuna {

// A static, NUL-terminated string such as "0.1.0".
const char* lacuna_version();

}  // namespace lacuna
