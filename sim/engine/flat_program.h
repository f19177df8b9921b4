// A RankClass flattened for the event loop: one fixed-size record per op, all
// streams concatenated, compute durations asked of the cost model once per op.
// Classes are shared by all their ranks; nothing here is per rank.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "sim/core/units.h"
#include "sim/cost/cost_model.h"
#include "sim/proto/program.pb.h"

namespace lacuna::engine {

enum class OpKind : uint8_t { kCompute, kCollective, kSend, kRecv, kRecord, kWait };

struct FlatOp {
  OpKind kind = OpKind::kCompute;
  // host_ns > 0 or host_sync: the stream may have to wait for its host. One
  // byte beside `kind`, so ops without host costs cost one test.
  bool has_host = false;
  bool host_sync = false;  // Op.host_sync: the host first waits for the stream
  // kPerturb* bits (perturbation.h): set by the simulator when its
  // Perturbation may vary this op; kPerturbHost also sets has_host. Took a
  // padding byte.
  uint8_t perturb = 0;
  ir::CollectiveKind collective = ir::COLLECTIVE_UNSPECIFIED;
  // Group slot (collective), peer slot (send/recv) or event (record/wait).
  int32_t slot = 0;
  // Collective: its index among the class's collectives (duration cache).
  // Send/recv: its endpoint (peer slot, channel, direction) in the class; the
  // channel itself is in the endpoint and the rank's mailbox.
  int32_t index = 0;
  int64_t host_ns = 0;  // Op.host_ns: the host's time to issue the op
  // Compute: unscaled duration in ns. Collective/send/recv: bytes. Wait: value.
  int64_t value = 0;
  int64_t tag = 0;       // send/recv
  int64_t fixed_ns = 0;  // collective/send: > 0 overrides the cost model
};
// Ops are scanned once per event; the host fields took the place of the
// channel (now only in Endpoint) so the record stays six words.
static_assert(sizeof(FlatOp) == 48);

// One side of a point-to-point channel as a class sees it; a rank turns it into
// a mailbox by substituting its peer.
struct Endpoint {
  int32_t peer_slot = 0;
  int32_t channel = 0;
  bool is_send = false;
  bool operator==(const Endpoint&) const = default;
};

struct FlatStream {
  std::string name;
  uint32_t begin = 0;  // [begin, end) in FlatClass::ops
  uint32_t end = 0;
};

struct FlatClass {
  std::vector<FlatStream> streams;
  std::vector<FlatOp> ops;
  std::vector<const ir::Op*> ir;  // parallel to ops, for observers and messages
  std::vector<Endpoint> endpoints;
  int32_t num_events = 0;
  // Per event, its EventRecord ops over all streams: the counter rises by that
  // much per iteration, so a wait of iteration k needs value + k * records.
  std::vector<int64_t> records_per_event;
  int32_t num_collectives = 0;
  // Durations of collectives, per (collective index, group shape id): -1 until
  // first asked. Filled lazily by the simulator.
  std::vector<int64_t> collective_ns;
};

// `cls` must outlive the result (ir pointers). Throws lacuna::Error when the
// cost model returns a negative duration.
FlatClass flatten_class(const ir::RankClass& cls, int class_id, const cost::CostModel& cost);

// "ALL_REDUCE", "send to rank 3 ..." helpers shared by messages.
std::string collective_name(ir::CollectiveKind kind);
std::string group_kind_name(ir::GroupKind kind);

}  // namespace lacuna::engine
