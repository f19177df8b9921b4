#include "sim/report/analyses/memory_warning.h"

#include <algorithm>
#include <vector>

#include <fmt/format.h>

#include "sim/report/formats/format.h"
#include "sim/report/formats/names.h"

namespace lacuna::report {
namespace {

constexpr size_t kWidth = 88;  // text columns inside the box

// `text` in lines of at most kWidth columns (continuations indented by 2).
std::vector<std::string> wrap_warning(const std::string& text) {
  std::vector<std::string> lines;
  std::string line;
  size_t start = 0;
  while (start < text.size()) {
    size_t end = text.find(' ', start);
    if (end == std::string::npos) end = text.size();
    const std::string word = text.substr(start, end - start);
    if (!line.empty() && display_columns(line) + 1 + display_columns(word) > kWidth) {
      lines.push_back(line);
      line = "  " + word;
    } else {
      line += (line.empty() ? "" : " ") + word;
    }
    start = end + 1;
  }
  if (!line.empty()) lines.push_back(line);
  return lines;
}

std::string recompute_of(const ir::ModuleInfo& m) {
  std::string r(recompute_name(m.recompute()));
  if (m.recompute() == scenario::RECOMPUTE_FULL && m.recompute_num_layers() > 0)
    r += fmt::format(" (first {} layer{} of each chunk)", m.recompute_num_layers(),
                     m.recompute_num_layers() == 1 ? "" : "s");
  return r;
}

}  // namespace

std::string memory_warning(const Summary& s, const OptionSpelling& spell) {
  if (s.over_capacity_ranks == 0 || s.memory_capacity <= Bytes::zero()) return "";
  std::vector<std::string> paragraphs;
  paragraphs.push_back(fmt::format("WARNING: {} of {} ranks exceed HBM (peak {} > {}): this iteration cannot run as "
                                   "configured",
                                   s.over_capacity_ranks, s.num_gpus, format_gb(Bytes(s.peak_memory.max)),
                                   format_gb(s.memory_capacity)));
  const auto worst = std::find_if(s.ranks.begin(), s.ranks.end(),
                                  [&](const RankAccount& r) { return r.rank == s.peak_memory.worst_rank; });
  if (worst != s.ranks.end()) {
    const Bytes reserve = worst->peak_memory - worst->baseline_memory - worst->activation_peak;
    paragraphs.push_back(fmt::format("rank {}: model state and overheads {}, activations {}, allocator reserve {} "
                                     "(docs/memory-model.md#feasibility)",
                                     worst->rank, format_gb(worst->baseline_memory), format_gb(worst->activation_peak),
                                     format_gb(reserve)));
  }
  if (s.multimodal()) {
    std::string modules;
    for (const ir::ModuleInfo& m : s.info.modules())
      modules += fmt::format("{}{} {}", modules.empty() ? "" : ", ", m.name(), recompute_of(m));
    paragraphs.push_back("recompute as placed: " + modules +
                         "; the placement chose the cheapest recompute that fits by its memory model, or the most it "
                         "has when none does");
  } else {
    paragraphs.push_back("reduce it with more recompute (parallel.recompute, recompute_num_layers), the distributed "
                         "optimizer, or more pipeline / tensor parallelism; lacuna simulate keeps the recompute an "
                         "LLM-only scenario asks for");
  }
  // Spelled before wrapping, so that the box stays aligned.
  paragraphs.push_back(spell_options(fmt::format("‹strict-memory› makes this an error (exit {})", kExitOverCapacity), spell));

  const std::string bar(kWidth + 6, '!');
  std::string out = "  " + bar + "\n";
  for (const std::string& p : paragraphs)
    for (const std::string& line : wrap_warning(p)) out += "  !! " + pad_right(line, kWidth) + " !!\n";
  out += "  " + bar + "\n";
  return out;
}

}  // namespace lacuna::report
