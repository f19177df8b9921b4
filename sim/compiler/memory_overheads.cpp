#include "sim/compiler/memory_overheads.h"

#include <algorithm>
#include <cmath>
#include <vector>

namespace lacuna::compiler {

int32_t rank_communicators(const ir::Program& program, int32_t rank) {
  const ir::RankBinding& b = program.ranks(rank);
  std::vector<int32_t> groups;
  for (int32_t g : b.group())
    if (g >= 0) groups.push_back(g);
  std::sort(groups.begin(), groups.end());
  const auto distinct = std::unique(groups.begin(), groups.end()) - groups.begin();
  const bool p2p = std::any_of(b.peer().begin(), b.peer().end(), [](int32_t p) { return p >= 0; });
  return static_cast<int32_t>(distinct) + (p2p ? 1 : 0);
}

void apply_memory_overheads(ir::Program& program) {
  const auto& mo = program.cluster().memory_overheads();
  const int64_t context =
      mo.has_cuda_context_gib() ? static_cast<int64_t>(std::llround(mo.cuda_context_gib() * 1073741824.0)) : 0;
  const int64_t per_communicator =
      mo.has_nccl_communicator_mib() ? static_cast<int64_t>(std::llround(mo.nccl_communicator_mib() * 1048576.0))
                                     : 0;
  std::vector<int32_t> communicators(static_cast<size_t>(program.classes_size()), 0);
  for (int32_t r = 0; r < program.ranks_size(); ++r) {
    const int32_t c = program.ranks(r).class_id();
    if (c < 0 || c >= program.classes_size()) continue;
    communicators[static_cast<size_t>(c)] = std::max(communicators[static_cast<size_t>(c)], rank_communicators(program, r));
  }
  for (int32_t c = 0; c < program.classes_size(); ++c)
    program.mutable_classes(c)->mutable_memory()->set_other_bytes(context +
                                                                  per_communicator * communicators[static_cast<size_t>(c)]);
}

}  // namespace lacuna::compiler
