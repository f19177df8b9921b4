// Applying a hardware preset under the user's cluster settings.
#pragma once

#include "sim/scenario/scenario.h"

namespace lacuna::scenario {

// The preset named by `user.preset` (none: `user` as is) with every field the
// user set on top: optional scalars override only when set, and efficiency map
// entries merge per key and per subfield. Throws for an unknown preset name.
Cluster resolve_cluster(const Cluster& user, const SourceMap& locations);

}  // namespace lacuna::scenario
