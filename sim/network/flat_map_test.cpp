#include "sim/network/flat_map.h"

#include <gtest/gtest.h>

#include <map>
#include <random>

namespace lacuna::network {
namespace {

TEST(FlatMap, MatchesStdMapUnderRandomInsertsAndErases) {
  std::mt19937_64 rng(42);
  FlatMap m;
  std::map<uint64_t, uint32_t> want;
  for (int step = 0; step < 200000; ++step) {
    const uint64_t key = rng() % 5000;  // many collisions and reinsertions
    if (rng() % 3 == 0) {
      m.erase(key);
      want.erase(key);
    } else {
      const uint32_t v = static_cast<uint32_t>(rng());
      m.put(key, v);
      want[key] = v;
    }
    if (step % 997 == 0) {
      for (uint64_t k = 0; k < 5000; ++k) {
        const auto it = want.find(k);
        ASSERT_EQ(m.find(k), it == want.end() ? FlatMap::kMissing : it->second) << "key " << k << " step " << step;
      }
    }
  }
  EXPECT_EQ(m.size(), want.size());
}

}  // namespace
}  // namespace lacuna::network
