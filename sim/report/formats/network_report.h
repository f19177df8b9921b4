// The network sections of `lacuna simulate`'s outputs: achieved bandwidth per
// collective kind (CommSummary) and the busiest links (LinkSummary), as
// terminal rows and as JSON values (docs/outputs.md).
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "sim/report/observers/comm_accounting.h"
#include "sim/report/analyses/link_summary.h"

namespace lacuna::report {

// Terminal blocks, each starting with a blank line; GB/s, GB, s/ms/µs/ns.
std::string format_comm(const CommSummary& comm);
std::string format_links(const LinkSummary& links);

// {"simulated_ranks_only", "simulated_ranks", "collectives": [...]}
nlohmann::ordered_json comm_json(const CommSummary& comm);
// {"model": "flow" | "analytic", ...}
nlohmann::ordered_json links_json(const LinkSummary& links);

}  // namespace lacuna::report
