// 1F1B with a chosen number of microbatches in flight on each pipeline rank.
//
// Megatron-LM's 1F1B (Narayanan et al., SC 2021, §2.2; megatron/core/
// pipeline_parallel/schedules.py, get_pp_rank_microbatches, read at
// core_v0.12.0 and at d98e8a64) runs pp − r − 1 warm-up forwards on pipeline
// rank r, then alternates one forward and one backward, then drains: rank r
// holds at most pp − r microbatches' activations, rank 0 the most. This
// generator lets each rank hold its own count k_r instead (warm-up k_r − 1):
//
// - fewer on the upstream ranks trades bubble for activation memory where it
//   peaks (rank 0 holds pp under Megatron-LM's counts, the last rank one);
// - more lets a rank run ahead of its neighbour, absorbing transfer latency
//   and uneven stages at the price of memory.
//
// The counts must not grow downstream (k_r ≥ k_{r+1}): rank r sends k_r
// forwards before it waits for its first backward, and rank r + 1 needs
// k_{r+1} of them before it sends that backward. Every count lies in
// [1, microbatches].
//
// With free transfers, equal stages, forward f and backward b, a cap of K on
// every rank (k_r = min(K, pp − r)) runs m microbatches in
// (m + pp − 1)(f + b) for K ≥ pp (Megatron-LM's schedule) and m·pp·(f + b)
// for K = 1 (one microbatch at a time); in_flight_1f1b_test.cpp checks these
// and the general case on the engine.
#pragma once

#include <cstdint>
#include <vector>

#include "sim/schedule/action.h"

namespace lacuna::schedule {

// Megatron-LM's counts: min(pp − r, microbatches) on rank r.
std::vector<int32_t> megatron_1f1b_in_flight(int32_t pp, int32_t microbatches);

// The schedule of `pp` ranks over `microbatches` microbatches, rank r holding
// `in_flight[r]` of them at its peak (one chunk per rank, Megatron-LM's
// layout). Throws lacuna::Error, naming the rank, for a list of another
// length, a count outside [1, microbatches] or one that grows downstream.
ActionSchedule in_flight_1f1b_schedule(int32_t pp, int32_t microbatches, const std::vector<int32_t>& in_flight);

}  // namespace lacuna::schedule
