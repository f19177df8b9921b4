#include "sim/scenario/resolve.h"

namespace lacuna::scenario {

Cluster resolve_cluster(const Cluster& user, const SourceMap& locations) {
  if (user.preset().empty()) return user;
  Cluster out;
  try {
    out = hardware_preset(user.preset());
  } catch (const Error& e) {
    throw Error(locations.locate("cluster.preset"), e.problem(), e.fix());
  }
  // MergeFrom already merges nested messages field by field and respects the
  // presence of `optional` scalars, but it replaces map values whole: merge the
  // efficiency map ourselves.
  Cluster rest = user;
  rest.mutable_gpu()->clear_efficiency();
  // MergeFrom appends repeated fields: a scenario that lists gemm_tiles means
  // its own list, so it replaces the preset's (the other shape_model fields
  // merge one by one like any optional field).
  if (user.gpu().shape_model().gemm_tiles_size() > 0) out.mutable_gpu()->mutable_shape_model()->clear_gemm_tiles();
  out.MergeFrom(rest);
  auto& merged = *out.mutable_gpu()->mutable_efficiency();
  for (const auto& [op_class, eff] : user.gpu().efficiency()) merged[op_class].MergeFrom(eff);
  return out;
}

}  // namespace lacuna::scenario
