// The order in which one host thread enqueues a rank's streams onto CUDA
// streams (runtime/cuda_backend.h). cudaStreamWaitEvent on an event that has
// not been recorded yet is a no-op, so a wait must be enqueued after the
// record it waits for: the order below is a run of the rank's program in
// which every EventWait comes after the EventRecord that satisfies it.
// Host-only, so it is tested on the CPU (enqueue_order_test.cpp).
//
// Event semantics are docs/engine.md's: counters start at 0 every iteration,
// a record increments its event's counter, wait (e, v) is satisfied when the
// counter is >= v. The k-th record of event e (1-based, in this order) is
// CUDA event instance (e, k); wait (e, v) with v >= 1 waits on instance
// (e, v). When one event is recorded from several streams, "the v-th record"
// is the v-th in this order (the program's usual case, one recording stream,
// is exact).
#pragma once

#include <cstdint>
#include <vector>

#include "runtime/plan.h"

namespace lacuna::runtime {

struct EnqueueStep {
  int stream = 0;  // index into the `streams` argument
  int op = 0;      // index into that stream's ops
  // Record: the instance this record is (1-based). Wait: the instance to wait
  // on (0: already satisfied, nothing to wait for). Otherwise 0.
  std::int64_t instance = 0;
};

struct EnqueueOrder {
  std::vector<EnqueueStep> steps;
  // Per event: how many records one iteration makes (CUDA event instances).
  std::vector<std::int64_t> records_per_event;
};

// Round-robin over the streams, one op per stream per turn; a stream blocked
// at a wait whose record has not been placed yet is skipped. All streams
// must belong to one rank with `num_events` events. When no stream can
// progress the program deadlocks: lacuna::Error naming every stream's
// blocked op and its event counter.
EnqueueOrder enqueue_order(const std::vector<const StreamPlan*>& streams, int num_events);

}  // namespace lacuna::runtime
