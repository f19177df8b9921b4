#include "sim/engine/event_queue.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <limits>
#include <random>
#include <vector>

#include "sim/engine/reference_event_queue.h"

namespace lacuna::engine {
namespace {

template <class Queue>
class EventQueueTest : public ::testing::Test {};

using Queues = ::testing::Types<HeapEventQueue<int>, RadixEventQueue<int>, ReferenceEventQueue<int>>;
TYPED_TEST_SUITE(EventQueueTest, Queues);

TYPED_TEST(EventQueueTest, EmptyQueuePopsNothing) {
  TypeParam q;
  ScheduledEvent<int> e;
  EXPECT_TRUE(q.empty());
  EXPECT_EQ(q.size(), 0u);
  EXPECT_FALSE(q.pop(e));
}

TYPED_TEST(EventQueueTest, PopsInTimeOrderAndTiesInScheduleOrder) {
  TypeParam q;
  q.schedule(TimeNs(30), 1);
  q.schedule(TimeNs(10), 2);
  q.schedule(TimeNs(30), 3);
  q.schedule(TimeNs(20), 4);
  q.schedule(TimeNs(10), 5);
  EXPECT_EQ(q.size(), 5u);
  std::vector<std::pair<int64_t, int>> order;
  ScheduledEvent<int> e;
  while (q.pop(e)) order.emplace_back(e.time.count(), e.payload);
  EXPECT_EQ(order, (std::vector<std::pair<int64_t, int>>{{10, 2}, {10, 5}, {20, 4}, {30, 1}, {30, 3}}));
  EXPECT_TRUE(q.empty());
}

TYPED_TEST(EventQueueTest, SequenceNumbersAreUniqueAndIncreasing) {
  TypeParam q;
  const EventId a = q.schedule(TimeNs(5), 0);
  const EventId b = q.schedule(TimeNs(1), 0);
  EXPECT_NE(a.seq, 0u);
  EXPECT_LT(a.seq, b.seq);
  ScheduledEvent<int> e;
  ASSERT_TRUE(q.pop(e));
  EXPECT_EQ(e.id.seq, b.seq);
}

TYPED_TEST(EventQueueTest, CancelRemovesOnlyPendingEvents) {
  TypeParam q;
  const EventId a = q.schedule(TimeNs(1), 1);
  const EventId b = q.schedule(TimeNs(2), 2);
  const EventId c = q.schedule(TimeNs(3), 3);
  EXPECT_TRUE(q.cancel(b));
  EXPECT_EQ(q.size(), 2u);
  EXPECT_FALSE(q.cancel(b));  // already cancelled
  ScheduledEvent<int> e;
  ASSERT_TRUE(q.pop(e));
  EXPECT_EQ(e.payload, 1);
  EXPECT_FALSE(q.cancel(a));  // already popped
  ASSERT_TRUE(q.pop(e));
  EXPECT_EQ(e.payload, 3);
  EXPECT_EQ(e.id.seq, c.seq);
  EXPECT_FALSE(q.pop(e));
  EXPECT_FALSE(q.cancel(EventId{}));
  EXPECT_FALSE(q.cancel(EventId{999, 0}));
}

TYPED_TEST(EventQueueTest, CancelledSlotReuseDoesNotResurrectOldEvent) {
  TypeParam q;
  const EventId a = q.schedule(TimeNs(10), 1);
  ASSERT_TRUE(q.cancel(a));
  q.schedule(TimeNs(20), 2);  // may reuse a's slot
  EXPECT_FALSE(q.cancel(a));
  ScheduledEvent<int> e;
  ASSERT_TRUE(q.pop(e));
  EXPECT_EQ(e.payload, 2);
  EXPECT_FALSE(q.pop(e));
}

TYPED_TEST(EventQueueTest, RescheduleByCancelMovesCompletion) {
  // The re-timing pattern of a flow-level network model.
  TypeParam q;
  const EventId done = q.schedule(TimeNs(100), 7);
  q.schedule(TimeNs(50), 1);
  ASSERT_TRUE(q.cancel(done));
  q.schedule(TimeNs(40), 7);
  ScheduledEvent<int> e;
  ASSERT_TRUE(q.pop(e));
  EXPECT_EQ(e.time, TimeNs(40));
  EXPECT_EQ(e.payload, 7);
  ASSERT_TRUE(q.pop(e));
  EXPECT_EQ(e.payload, 1);
  EXPECT_FALSE(q.pop(e));
}

// Random interleavings of schedule / pop / cancel give identical observable
// behaviour on the heap and on the reference. Times come from a small range so
// that ties are frequent.
template <class Queue>
void matches_reference_on_random_operations() {
  for (uint64_t seed = 1; seed <= 40; ++seed) {
    std::mt19937_64 rng(seed);
    Queue heap;
    ReferenceEventQueue<int> ref;
    std::vector<EventId> heap_ids, ref_ids;
    int64_t now = 0;
    const int steps = 2000 + static_cast<int>(seed % 7) * 300;
    for (int step = 0; step < steps; ++step) {
      const int action = static_cast<int>(rng() % 10);
      if (action < 5) {
        const TimeNs t(now + static_cast<int64_t>(rng() % 8));
        const int payload = static_cast<int>(rng() % 1000);
        heap_ids.push_back(heap.schedule(t, payload));
        ref_ids.push_back(ref.schedule(t, payload));
        ASSERT_EQ(heap_ids.back().seq, ref_ids.back().seq);
      } else if (action < 8) {
        ScheduledEvent<int> a, b;
        const bool ha = heap.pop(a);
        const bool hb = ref.pop(b);
        ASSERT_EQ(ha, hb) << "seed " << seed << " step " << step;
        if (ha) {
          ASSERT_EQ(a.time, b.time);
          ASSERT_EQ(a.id.seq, b.id.seq);
          ASSERT_EQ(a.payload, b.payload);
          ASSERT_GE(a.time.count(), now);  // never back in time
          now = a.time.count();
        }
      } else if (!heap_ids.empty()) {
        const size_t i = rng() % heap_ids.size();
        ASSERT_EQ(heap.cancel(heap_ids[i]), ref.cancel(ref_ids[i])) << "seed " << seed << " step " << step;
      }
      ASSERT_EQ(heap.size(), ref.size());
      ASSERT_EQ(heap.empty(), ref.empty());
    }
    // Drain: same remaining order.
    ScheduledEvent<int> a, b;
    while (heap.pop(a)) {
      ASSERT_TRUE(ref.pop(b));
      ASSERT_EQ(a.id.seq, b.id.seq);
    }
    EXPECT_FALSE(ref.pop(b));
  }
}

TEST(EventQueueProperty, HeapMatchesReferenceOnRandomOperations) {
  matches_reference_on_random_operations<HeapEventQueue<int>>();
}

TEST(EventQueueProperty, RadixMatchesReferenceOnRandomOperations) {
  matches_reference_on_random_operations<RadixEventQueue<int>>();
}

TEST(EventQueueProperty, RadixRejectsSchedulingIntoThePast) {
  RadixEventQueue<int> q;
  q.schedule(TimeNs(10), 1);
  ScheduledEvent<int> e;
  ASSERT_TRUE(q.pop(e));
  q.schedule(TimeNs(10), 2);  // same time, later seq: allowed
  EXPECT_THROW(q.schedule(TimeNs(9), 3), Error);
}

// Times spread over the whole int64 range exercise every radix bucket.
TEST(EventQueueProperty, RadixOrdersExtremeTimes) {
  RadixEventQueue<int> q;
  ReferenceEventQueue<int> ref;
  std::mt19937_64 rng(5);
  int64_t now = std::numeric_limits<int64_t>::min() / 2;
  for (int i = 0; i < 3000; ++i) {
    if (rng() % 3 != 0) {
      // now + delta without overflow: both fit in 128 bits, clamp to int64.
      const __int128 wide = static_cast<__int128>(now) + static_cast<__int128>(rng() >> (2 + rng() % 62));
      const int64_t t = static_cast<int64_t>(std::min<__int128>(wide, std::numeric_limits<int64_t>::max()));
      q.schedule(TimeNs(t), i);
      ref.schedule(TimeNs(t), i);
    } else {
      ScheduledEvent<int> a, b;
      ASSERT_EQ(q.pop(a), ref.pop(b));
      if (a.id.seq != 0) {
        ASSERT_EQ(a.id.seq, b.id.seq);
        now = a.time.count();
      }
    }
  }
  ScheduledEvent<int> a, b;
  while (q.pop(a)) {
    ASSERT_TRUE(ref.pop(b));
    ASSERT_EQ(a.id.seq, b.id.seq);
  }
  EXPECT_FALSE(ref.pop(b));
}

TEST(EventQueueProperty, HeapSortsLargeRandomInput) {
  std::mt19937_64 rng(99);
  HeapEventQueue<uint32_t> q(1 << 16);
  for (uint32_t i = 0; i < (1u << 16); ++i) q.schedule(TimeNs(static_cast<int64_t>(rng() % 5000)), i);
  ScheduledEvent<uint32_t> prev, e;
  ASSERT_TRUE(q.pop(prev));
  size_t n = 1;
  while (q.pop(e)) {
    ASSERT_TRUE(prev.time < e.time || (prev.time == e.time && prev.id.seq < e.id.seq));
    prev = e;
    ++n;
  }
  EXPECT_EQ(n, size_t{1} << 16);
}

}  // namespace
}  // namespace lacuna::engine
