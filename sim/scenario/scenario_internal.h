#pragma once

// Helpers that several of sim/scenario/'s sources share. One definition
// here, not a copy in each file's anonymous namespace: the library compiles
// in unity batches (cmake/LacunaBuildSpeed.cmake), where those would collide.

#include <cstdint>
#include <string>

namespace lacuna::scenario::internal {

// An integer as a message writes it.
inline std::string s(int64_t v) { return std::to_string(v); }

}  // namespace lacuna::scenario::internal
