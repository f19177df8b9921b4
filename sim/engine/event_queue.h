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
// HeapEventQueue is a 4-ary min-heap on a std::vector: O(log n) schedule and
// pop, no allocation once the vectors reached the peak number of pending events.
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

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

template <class Payload>
class HeapEventQueue {
 public:
  explicit HeapEventQueue(size_t expected_pending = 0) { reserve(expected_pending); }

  void reserve(size_t n) {
    heap_.reserve(n);
    slot_seq_.reserve(n);
    free_slots_.reserve(n);
  }

  EventId schedule(TimeNs time, Payload payload) {
    uint32_t slot;
    if (!free_slots_.empty()) {
      slot = free_slots_.back();
      free_slots_.pop_back();
    } else {
      slot = static_cast<uint32_t>(slot_seq_.size());
      slot_seq_.push_back(0);
    }
    const uint64_t seq = next_seq_++;
    slot_seq_[slot] = seq;
    heap_.push_back(Entry{make_key(time, seq), slot, payload});
    sift_up(heap_.size() - 1);
    ++live_;
    return EventId{seq, slot};
  }

  // True if the event was pending and is now cancelled; false if it already
  // popped, was cancelled before, or never belonged to this queue.
  bool cancel(EventId id) {
    if (id.seq == 0 || id.slot >= slot_seq_.size() || slot_seq_[id.slot] != id.seq) return false;
    release(id.slot);
    return true;
  }

  // Removes the earliest pending event into `out`; false when none is left.
  bool pop(ScheduledEvent<Payload>& out) {
    while (!heap_.empty()) {
      const Entry top = heap_.front();
      remove_top();
      const uint64_t seq = key_seq(top.key);
      if (slot_seq_[top.slot] != seq) continue;  // cancelled
      release(top.slot);
      out.time = key_time(top.key);
      out.id = EventId{seq, top.slot};
      out.payload = top.payload;
      return true;
    }
    return false;
  }

  bool empty() const { return live_ == 0; }
  size_t size() const { return live_; }

 private:
  // The (time, seq) key as one unsigned 128-bit number (time's sign bit
  // flipped so that unsigned order is signed order): one branch-free compare.
  using Key = unsigned __int128;
  struct Entry {
    Key key;
    uint32_t slot;
    Payload payload;
  };
  static constexpr size_t kArity = 4;

  static Key make_key(TimeNs time, uint64_t seq) {
    const uint64_t t = static_cast<uint64_t>(time.count()) ^ (uint64_t{1} << 63);
    return (static_cast<Key>(t) << 64) | seq;
  }
  static TimeNs key_time(Key k) {
    return TimeNs(static_cast<int64_t>(static_cast<uint64_t>(k >> 64) ^ (uint64_t{1} << 63)));
  }
  static uint64_t key_seq(Key k) { return static_cast<uint64_t>(k); }
  static bool before(const Entry& a, const Entry& b) { return a.key < b.key; }

  void release(uint32_t slot) {
    slot_seq_[slot] = 0;
    free_slots_.push_back(slot);
    --live_;
  }

  void sift_up(size_t i) {
    Entry e = heap_[i];
    while (i > 0) {
      const size_t parent = (i - 1) / kArity;
      if (!before(e, heap_[parent])) break;
      heap_[i] = heap_[parent];
      i = parent;
    }
    heap_[i] = e;
  }

  // Floyd's bottom-up deletion: move the hole to a leaf along the smaller
  // children (no comparison with the displaced last element on the way down),
  // then sift that element up from the leaf, where it usually belongs.
  void remove_top() {
    const Entry last = heap_.back();
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
        if (before(heap_[c], heap_[best])) best = c;
      }
      heap_[i] = heap_[best];
      i = best;
    }
    heap_[i] = last;
    sift_up(i);
  }

  std::vector<Entry> heap_;
  std::vector<uint64_t> slot_seq_;  // seq of the pending event in each slot; 0 = free
  std::vector<uint32_t> free_slots_;
  uint64_t next_seq_ = 1;
  size_t live_ = 0;
};

}  // namespace lacuna::engine
