// Editing a compiled RankClass: inserting ops into its streams, adding
// streams and events. The Optimus and heterogeneous placements start from the
// LLM's compiled classes and add encoder work this way, so the LLM's own
// program stays exactly what compiler::compile wrote.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "sim/proto/program.pb.h"

namespace lacuna::placement {

// Ops to put in front of op `before` of a stream (before == ops_size():
// append). Several insertions at one position keep the order given.
struct Insertion {
  int32_t before = 0;
  std::vector<ir::Op> ops;
};

// Applies all insertions to `stream` in one pass (positions refer to the
// stream as it was). Throws lacuna::Error for a position out of range.
void splice(ir::Stream& stream, std::vector<Insertion> insertions);

// Appends a stream (returns its index) / a fresh event id (num_events grows).
int32_t add_stream(ir::RankClass& rank_class, const std::string& name, ir::StreamKind kind);
int32_t add_event(ir::RankClass& rank_class);
// Index of the stream named `name`, -1 if none.
int32_t find_stream(const ir::RankClass& rank_class, const std::string& name);

// Group / peer slots added to a program: returns the new slot index, and
// extends every RankBinding's group / peer list with -1.
int32_t add_group_slot(ir::Program& program, const std::string& name, ir::GroupKind kind);
int32_t add_peer_slot(ir::Program& program, const std::string& name);
// Index of the group of `kind` with `ranks` (ascending) in program.groups,
// adding it when new. A group of another kind with the same ranks is not
// reused: each module gets its own communicator (as Megatron creates process
// groups per module), since collectives match per group in issue order and
// two modules' streams issue theirs independently (an encoder DP group equal
// to the LLM's world group raced in `lacuna execute`).
int32_t intern_group(ir::Program& program, ir::GroupKind kind, const std::vector<int32_t>& ranks);

// Fills one side of a point-to-point transfer (ir::Send or ir::Recv: the
// matching fields are the same on both sides).
template <class SendOrRecv>
void set_p2p(SendOrRecv& p, int32_t peer_slot, int64_t bytes, int32_t channel, int64_t tag) {
  p.set_peer_slot(peer_slot);
  p.set_bytes(bytes);
  p.set_channel(channel);
  p.set_tag(tag);
}

}  // namespace lacuna::placement
