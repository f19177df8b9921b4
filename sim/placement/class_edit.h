// Editing a compiled RankClass: inserting ops into its streams, adding
// streams and events. The Optimus and heterogeneous placements start from the
// LLM's compiled classes and add encoder work this way, so the LLM's own
// program stays exactly what compiler::compile wrote. ClassEditor is the one
// editor both use; fresh classes are built by compiler::ClassBuilder, and
// both take compiler::OpContext for what an op belongs to.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "sim/compiler/class_builder.h"
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

// Streams and events of one class, created on first use by name (a stream
// asked for again with another kind is an error). Compute ops go into a
// caller-provided block (spliced into the compute stream later, at the
// position the caller chooses); ops of other streams are appended to the
// stream itself. Every event has one producer stream, and ops are emitted in
// the order they will stand in each stream, so the counter the editor tracks
// is the value the k-th record reaches (events are timeline counters).
class ClassEditor {
 public:
  // Finds the class's "compute" stream (adds it to a class without one).
  explicit ClassEditor(ir::RankClass& rank_class);

  int32_t stream(const std::string& name, ir::StreamKind kind);
  // The stream at `index` (from stream()), to append ops to directly.
  ir::Stream& stream_at(int32_t index) { return *c_.mutable_streams(index); }
  int32_t compute() const { return compute_; }
  int32_t event(const std::string& key);
  void set_compute_block(std::vector<ir::Op>* block) { block_ = block; }
  std::vector<ir::Op>* compute_block() const { return block_; }

  // Appends an op (kind unset); the pointer is valid until the next add.
  ir::Op* add(int32_t stream, const compiler::OpContext& ctx);
  int64_t record(int32_t stream, int32_t event, const compiler::OpContext& ctx);
  void wait(int32_t stream, int32_t event, int64_t value, const compiler::OpContext& ctx);
  // Records on `from`, waits on `to` (returns the value).
  int64_t handoff(int32_t from, int32_t to, const std::string& event_key, const compiler::OpContext& ctx);

  ir::RankClass& rank_class() { return c_; }

 private:
  ir::RankClass& c_;
  int32_t compute_ = -1;
  std::vector<ir::Op>* block_ = nullptr;
  std::map<std::string, int32_t> events_;
  std::map<int32_t, int64_t> counters_;
};

ir::Op* add_collective(ClassEditor& ed, int32_t stream, const compiler::OpContext& ctx, ir::CollectiveKind kind,
                       int32_t slot, int64_t bytes);
ir::Op* add_send(ClassEditor& ed, int32_t stream, const compiler::OpContext& ctx, int32_t peer_slot, int64_t bytes,
                 int32_t channel, int64_t tag);
ir::Op* add_recv(ClassEditor& ed, int32_t stream, const compiler::OpContext& ctx, int32_t peer_slot, int64_t bytes,
                 int32_t channel, int64_t tag);

}  // namespace lacuna::placement
