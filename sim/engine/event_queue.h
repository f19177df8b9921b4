// The future-event list of the discrete-event engine (ns-3 style).
//
// Ordering key: (time, sequence). The sequence number is assigned by
// schedule() from a per-queue counter, so events at the same simulated time pop
// in the order they were scheduled (FIFO among ties). That makes every run of
// the same inputs pop the same events in the same order: determinism does not
// depend on heap layout or on payload contents.
//
// Cancellation is lazy: cancel() frees the event's slot, and the stale heap
// entry is skipped when it surfaces. A later network model uses it to re-time a
// transfer (cancel the old completion, schedule a new one).
//
// HeapEventQueue is a 4-ary min-heap of 16-byte keys on a std::vector: O(log n)
// schedule and pop, no allocation once the vectors reached the peak number of
// pending events. Limits: 2^40 events scheduled per queue, 2^24 pending.
#pragma once

#include <array>
#include <cstdint>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "sim/core/error.h"
#include "sim/core/units.h"

namespace lacuna::engine {

// Names one scheduled event. `seq` is unique within a queue and never 0 for a
// scheduled event; `slot` lets the heap find its bookkeeping in O(1).
struct EventId {
  uint64_t seq = 0;
  uint32_t slot = 0;
  bool operator==(const EventId&) const = default;
};

template <class Payload>
struct ScheduledEvent {
  TimeNs time;
  EventId id;
  Payload payload{};
};

namespace detail {

// An event's key, (time, seq, slot) as one unsigned 128-bit number: time in the
// high word (sign bit flipped so that unsigned order is signed order), then the
// 40-bit sequence number and the 24-bit slot. Seq is unique, so the slot bits
// never decide an order: key order is exactly (time, seq).
using EventKey = unsigned __int128;
inline constexpr uint64_t kSlotBits = 24;
inline constexpr uint64_t kSlotMask = (uint64_t{1} << kSlotBits) - 1;
inline constexpr uint64_t kSeqMask = (uint64_t{1} << (64 - kSlotBits)) - 1;

inline EventKey make_key(TimeNs time, uint64_t seq, uint32_t slot) {
  const uint64_t t = static_cast<uint64_t>(time.count()) ^ (uint64_t{1} << 63);
  return (static_cast<EventKey>(t) << 64) | (seq << kSlotBits) | slot;
}
inline TimeNs key_time(EventKey k) {
  return TimeNs(static_cast<int64_t>(static_cast<uint64_t>(k >> 64) ^ (uint64_t{1} << 63)));
}
inline uint64_t key_seq(EventKey k) { return static_cast<uint64_t>(k) >> kSlotBits; }
inline uint32_t key_slot(EventKey k) { return static_cast<uint32_t>(static_cast<uint64_t>(k) & kSlotMask); }

// What both queues share: sequence numbers, payloads parked in reusable slots,
// and lazy cancellation (a cancelled slot no longer holds the key's seq).
template <class Payload>
class EventSlots {
 public:
  void reserve(size_t n) {
    slot_seq_.reserve(n);
    payload_.reserve(n);
    free_slots_.reserve(n);
  }

  EventKey add(TimeNs time, const Payload& payload) {
    uint32_t slot;
    if (!free_slots_.empty()) {
      slot = free_slots_.back();
      free_slots_.pop_back();
    } else {
      if (slot_seq_.size() > kSlotMask) throw Error("event queue: more than 2^24 pending events");
      slot = static_cast<uint32_t>(slot_seq_.size());
      slot_seq_.push_back(0);
      payload_.emplace_back();
    }
    if (next_seq_ > kSeqMask) throw Error("event queue: more than 2^40 events scheduled");
    const uint64_t seq = next_seq_++;
    slot_seq_[slot] = seq;
    payload_[slot] = payload;
    ++live_;
    return make_key(time, seq, slot);
  }

  bool cancel(EventId id) {
    if (id.seq == 0 || id.slot >= slot_seq_.size() || slot_seq_[id.slot] != id.seq) return false;
    release(id.slot);
    ++stale_keys_;
    return true;
  }

  // False for a cancelled key (skip it); otherwise fills `out` and frees the slot.
  bool take(EventKey key, ScheduledEvent<Payload>& out) {
    const uint32_t slot = key_slot(key);
    const uint64_t seq = key_seq(key);
    if (slot_seq_[slot] != seq) {
      --stale_keys_;
      return false;
    }
    release(slot);
    out.time = key_time(key);
    out.id = EventId{seq, slot};
    out.payload = payload_[slot];
    return true;
  }

  // Whether `key` still stands for a scheduled event. Without cancelled keys
  // in the queue (the engine's usual state) every key does: no lookup.
  bool pending(EventKey key) const { return stale_keys_ == 0 || slot_seq_[key_slot(key)] == key_seq(key); }
  // A cancelled key the queue dropped without take().
  void discard_stale() { --stale_keys_; }
  size_t live() const { return live_; }

 private:
  void release(uint32_t slot) {
    slot_seq_[slot] = 0;
    free_slots_.push_back(slot);
    --live_;
  }

  std::vector<uint64_t> slot_seq_;  // seq of the pending event in each slot; 0 = free
  std::vector<Payload> payload_;    // by slot
  std::vector<uint32_t> free_slots_;
  uint64_t next_seq_ = 1;
  size_t live_ = 0;
  size_t stale_keys_ = 0;  // cancelled keys still inside the queue's structure
};

}  // namespace detail

// A 4-ary min-heap of keys: any schedule order is allowed.
template <class Payload>
class HeapEventQueue {
 public:
  explicit HeapEventQueue(size_t expected_pending = 0) { reserve(expected_pending); }

  void reserve(size_t n) {
    heap_.reserve(n);
    slots_.reserve(n);
  }

  EventId schedule(TimeNs time, Payload payload) {
    const Key key = slots_.add(time, payload);
    heap_.push_back(key);
    sift_up(heap_.size() - 1);
    return EventId{detail::key_seq(key), detail::key_slot(key)};
  }

  // True if the event was pending and is now cancelled; false if it already
  // popped, was cancelled before, or never belonged to this queue.
  bool cancel(EventId id) { return slots_.cancel(id); }

  // Removes the earliest pending event into `out`; false when none is left.
  bool pop(ScheduledEvent<Payload>& out) {
    while (!heap_.empty()) {
      const Key top = heap_.front();
      remove_top();
      if (slots_.take(top, out)) return true;
    }
    return false;
  }

  bool empty() const { return slots_.live() == 0; }
  size_t size() const { return slots_.live(); }

 private:
  using Key = detail::EventKey;
  static constexpr size_t kArity = 4;  // four 16-byte children fill one cache line

  void sift_up(size_t i) {
    const Key e = heap_[i];
    while (i > 0) {
      const size_t parent = (i - 1) / kArity;
      if (!(e < heap_[parent])) break;
      heap_[i] = heap_[parent];
      i = parent;
    }
    heap_[i] = e;
  }

  // Floyd's bottom-up deletion: move the hole to a leaf along the smaller
  // children (no comparison with the displaced last element on the way down),
  // then sift that element up from the leaf, where it usually belongs.
  void remove_top() {
    const Key last = heap_.back();
    heap_.pop_back();
    const size_t n = heap_.size();
    if (n == 0) return;
    size_t i = 0;
    for (;;) {
      const size_t first = i * kArity + 1;
      if (first >= n) break;
      size_t best = first;
      const size_t stop = first + kArity < n ? first + kArity : n;
      for (size_t c = first + 1; c < stop; ++c) {
        if (heap_[c] < heap_[best]) best = c;
      }
      heap_[i] = heap_[best];
      i = best;
    }
    heap_[i] = last;
    sift_up(i);
  }

  std::vector<Key> heap_;
  detail::EventSlots<Payload> slots_;
};

// A radix heap (Ahuja, Mehlhorn, Orlin, Tarjan 1990) over the 128-bit keys,
// for the discrete-event loop, where keys are monotone: every event scheduled
// has time ≥ the time of the last one popped, and a later sequence number, so
// its key is larger than the last popped key. Bucket b > 0 holds the keys
// whose highest bit differing from the last popped key is bit b − 1; pushing
// is O(1), and a key moves to a lower bucket at most 128 times over its life.
// Same observable order as HeapEventQueue: exactly (time, seq).
// Precondition of schedule(): time ≥ the time of the last popped event
// (throws lacuna::Error otherwise).
template <class Payload>
class RadixEventQueue {
 public:
  explicit RadixEventQueue(size_t expected_pending = 0) { reserve(expected_pending); }

  void reserve(size_t n) { slots_.reserve(n); }

  EventId schedule(TimeNs time, Payload payload) {
    if (time < detail::key_time(last_)) {
      throw Error("event queue: an event was scheduled at t = " + std::to_string(time.count()) +
                  " ns, before the current time " + std::to_string(detail::key_time(last_).count()) + " ns");
    }
    const Key key = slots_.add(time, payload);
    insert(key);
    return EventId{detail::key_seq(key), detail::key_slot(key)};
  }

  bool cancel(EventId id) { return slots_.cancel(id); }

  bool pop(ScheduledEvent<Payload>& out) {
    for (;;) {
      if (buckets_[0].empty() && !refill_bucket_zero()) return false;
      const Key top = buckets_[0].back();
      buckets_[0].pop_back();
      if (buckets_[0].empty()) nonempty_[0] &= ~uint64_t{1};
      if (slots_.take(top, out)) return true;
    }
  }

  bool empty() const { return slots_.live() == 0; }
  size_t size() const { return slots_.live(); }

 private:
  using Key = detail::EventKey;
  static constexpr int kBuckets = 129;

  static int bucket_of(Key key, Key last) {
    const Key x = key ^ last;
    const auto hi = static_cast<uint64_t>(x >> 64);
    if (hi != 0) return 128 - __builtin_clzll(hi);
    const auto lo = static_cast<uint64_t>(x);
    return lo == 0 ? 0 : 64 - __builtin_clzll(lo);
  }

  void insert(Key key) {
    const int b = bucket_of(key, last_);
    buckets_[b].push_back(key);
    nonempty_[b >> 6] |= uint64_t{1} << (b & 63);
  }

  // Makes the smallest pending key the new `last_` and redistributes its
  // bucket: every other key of it lands in a lower bucket. Cancelled keys are
  // dropped here, so `last_` is always an event that pop() returns next (a
  // cancelled key must not raise the floor for later schedules). False when
  // nothing is pending.
  bool refill_bucket_zero() {
    for (;;) {
      int b = -1;
      for (int w = 0; w < 3; ++w) {
        if (nonempty_[w] != 0) {
          b = w * 64 + __builtin_ctzll(nonempty_[w]);
          break;
        }
      }
      if (b < 0) return false;
      nonempty_[b >> 6] &= ~(uint64_t{1} << (b & 63));
      scratch_.swap(buckets_[b]);
      bool found = false;
      Key min = 0;
      size_t kept = 0;
      for (const Key k : scratch_) {
        if (!slots_.pending(k)) {
          slots_.discard_stale();
          continue;
        }
        scratch_[kept++] = k;
        if (!found || k < min) min = k;
        found = true;
      }
      scratch_.resize(kept);
      if (found) {
        last_ = min;
        for (const Key k : scratch_) insert(k);
      }
      scratch_.clear();
      if (found) return true;
    }
  }

  std::array<std::vector<Key>, kBuckets> buckets_;
  uint64_t nonempty_[3] = {0, 0, 0};
  Key last_ = detail::make_key(TimeNs(std::numeric_limits<int64_t>::min()), 0, 0);
  std::vector<Key> scratch_;
  detail::EventSlots<Payload> slots_;
};

}  // namespace lacuna::engine
