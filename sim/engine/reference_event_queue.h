// The obviously-correct event queue the heap is tested against: a std::map
// keyed by (time, sequence) plus an index from sequence to time for cancel.
// Same interface and ordering key as HeapEventQueue; allocates per event, so it
// is for tests only.
#pragma once

#include <cstdint>
#include <map>
#include <unordered_map>
#include <utility>

#include "sim/core/units.h"
#include "sim/engine/event_queue.h"

namespace lacuna::engine {

template <class Payload>
class ReferenceEventQueue {
 public:
  explicit ReferenceEventQueue(size_t /*expected_pending*/ = 0) {}

  EventId schedule(TimeNs time, Payload payload) {
    const uint64_t seq = next_seq_++;
    events_.emplace(std::make_pair(time.count(), seq), payload);
    time_of_.emplace(seq, time.count());
    return EventId{seq, 0};
  }

  bool cancel(EventId id) {
    auto it = time_of_.find(id.seq);
    if (it == time_of_.end()) return false;
    events_.erase(std::make_pair(it->second, id.seq));
    time_of_.erase(it);
    return true;
  }

  bool pop(ScheduledEvent<Payload>& out) {
    if (events_.empty()) return false;
    auto it = events_.begin();
    out.time = TimeNs(it->first.first);
    out.id = EventId{it->first.second, 0};
    out.payload = it->second;
    time_of_.erase(it->first.second);
    events_.erase(it);
    return true;
  }

  bool empty() const { return events_.empty(); }
  size_t size() const { return events_.size(); }

 private:
  std::map<std::pair<int64_t, uint64_t>, Payload> events_;
  std::unordered_map<uint64_t, int64_t> time_of_;
  uint64_t next_seq_ = 1;
};

}  // namespace lacuna::engine
