// For tests: the text a lacuna::Error prints ("file:line:col: field: what
// (fix)", option references in the neutral spelling, option_text.h), or ""
// when `f` throws nothing.
#pragma once

#include <functional>
#include <string>

#include "sim/core/error.h"
#include "sim/core/option_text.h"

namespace lacuna::testing_support {

inline std::string formatted_error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return neutral_options(format_error(e.where(), e.problem(), e.fix()));
  }
  return "";
}

}  // namespace lacuna::testing_support
