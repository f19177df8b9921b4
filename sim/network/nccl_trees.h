// NCCL's double binary tree over the nodes of a tree all-reduce
// (NVIDIA/nccl src/graph/trees.cc, ncclGetBtree / ncclGetDtree): tree 0 is a
// binary tree over ranks 0..n−1 built from their lowest set bits; tree 1 is
// tree 0 shifted by one (odd n) or mirrored (even n), so that most leaves of
// one tree are inner nodes of the other and every node sends and receives
// about the same amount in total.
#pragma once

#include <cstdint>

namespace lacuna::network {

// Parent of `rank` in NCCL's binary tree over n ranks; −1 for the root (0).
int32_t btree_parent(int32_t n, int32_t rank);
// Parent of `rank` in tree 0 or 1 of NCCL's double binary tree; −1 for a root.
int32_t dtree_parent(int32_t n, int32_t tree, int32_t rank);

}  // namespace lacuna::network
