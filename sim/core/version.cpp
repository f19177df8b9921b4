#include "sim/core/version.h"

// CMakeLists.txt sets LACUNA_VERSION on this file alone.
#ifndef LACUNA_VERSION
#error "LACUNA_VERSION is set by CMakeLists.txt on sim/core/version.cpp"
#endif

namespace lacuna {

const char* lacuna_version() { return LACUNA_VERSION; }

}  // namespace lacuna
