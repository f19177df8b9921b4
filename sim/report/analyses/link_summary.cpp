#include "sim/report/analyses/link_summary.h"

#include <algorithm>

namespace lacuna::report {

std::string_view link_kind_key(network::LinkKind kind) {
  switch (kind) {
    case network::LinkKind::kNvlinkUp: return "nvlink_up";
    case network::LinkKind::kNvlinkDown: return "nvlink_down";
    case network::LinkKind::kNicUp: return "nic_up";
    case network::LinkKind::kNicDown: return "nic_down";
    case network::LinkKind::kTrunkUp: return "trunk_up";
    case network::LinkKind::kTrunkDown: return "trunk_down";
  }
  return "unknown";
}

LinkSummary summarize_links(const std::vector<network::LinkInfo>& links,
                            const std::vector<network::LinkStats>& stats, size_t top) {
  LinkSummary s;
  s.modelled = true;
  s.links = links.size();
  std::vector<LinkRow> rows;
  for (const network::LinkStats& st : stats) {
    if (st.link >= links.size() || !(st.bytes > 0)) continue;
    const network::LinkInfo& info = links[st.link];
    rows.push_back({st.link, info.name, info.kind, info.capacity_bytes_per_s, st.bytes, st.mean_utilisation,
                    st.peak_utilisation, st.saturated});
  }
  // Sorted here, whatever order the model used, so the output is deterministic.
  std::sort(rows.begin(), rows.end(), [](const LinkRow& a, const LinkRow& b) {
    // Busiest = highest mean utilisation: a spine trunk moving the most bytes
    // at 2 % of its capacity matters less than a NIC near saturation.
    if (a.mean_utilisation != b.mean_utilisation) return a.mean_utilisation > b.mean_utilisation;
    return a.bytes != b.bytes ? a.bytes > b.bytes : a.link < b.link;
  });
  s.links_with_traffic = rows.size();
  if (rows.size() > top) rows.resize(top);
  s.busiest = std::move(rows);
  return s;
}

LinkSummary analytic_links() { return LinkSummary{}; }

}  // namespace lacuna::report
