#include "sim/network/nccl_trees.h"

namespace lacuna::network {

int32_t btree_parent(int32_t n, int32_t rank) {
  if (rank == 0) return -1;
  int32_t bit = 1;
  while (bit < n && (bit & rank) == 0) bit <<= 1;
  int32_t up = (rank ^ bit) | (bit << 1);
  if (up >= n) up = rank ^ bit;
  return up;
}

int32_t dtree_parent(int32_t n, int32_t tree, int32_t rank) {
  if (tree == 0) return btree_parent(n, rank);
  if (n % 2 == 1) {  // shift by one
    const int32_t p = btree_parent(n, (rank - 1 + n) % n);
    return p == -1 ? -1 : (p + 1) % n;
  }
  const int32_t p = btree_parent(n, n - 1 - rank);  // mirror
  return p == -1 ? -1 : n - 1 - p;
}

}  // namespace lacuna::network
