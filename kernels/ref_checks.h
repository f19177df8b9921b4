// Argument checks shared by the CPU reference kernels: a wrong buffer size is
// a lacuna::Error naming the kernel and the buffer, never undefined behaviour.
#pragma once

#include <cstddef>
#include <string>

#include "sim/core/error.h"

namespace lacuna::kernels::ref {

inline void check_size(const char* fn, const char* name, std::size_t got, std::size_t want) {
  if (got != want)
    throw Error(std::string(fn) + ": " + name + " has " + std::to_string(got) + " elements, expected " +
                std::to_string(want));
}

}  // namespace lacuna::kernels::ref
