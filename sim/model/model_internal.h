#pragma once

// Helpers that several of sim/model/'s sources share. One definition here,
// not a copy in each file's anonymous namespace: the library compiles in
// unity batches (cmake/LacunaBuildSpeed.cmake), where those would collide.

#include <cstdint>

#include "sim/model/layer_shape.h"

namespace lacuna::model::internal {

inline double d(int64_t v) { return static_cast<double>(v); }

// Parameters of one norm: RMSNorm has a gain, LayerNorm a gain and a bias.
inline int64_t norm_parameters(const LayerShape& s) { return (s.norm == scenario::RMSNORM ? 1 : 2) * s.hidden; }

}  // namespace lacuna::model::internal
