// The engine's seam for a communication model that knows about contention: a
// collective or a transfer is handed to it when it begins, and the model says
// when it will end — and says again, whenever traffic that starts or ends
// elsewhere changes that answer. Without one, the engine asks the CostModel
// for a fixed duration per operation (the analytic, contention-free mode).
//
// Tokens are the engine's own names for operations in flight; the model only
// echoes them. Completion times are absolute simulated nanoseconds, never
// before the `now` of the call that produced them.
#pragma once

#include <cstdint>
#include <span>
#include <string_view>

#include "sim/core/units.h"
#include "sim/proto/program.pb.h"

namespace lacuna::engine {

struct CompletionUpdate {
  uint64_t token = 0;
  TimeNs at;
};

class CommunicationModel {
 public:
  virtual ~CommunicationModel() = default;

  // Short description for reports, e.g. "flow-level: max-min fair sharing ...".
  virtual std::string_view name() const = 0;

  // Called once per run before any operation, so that a model can be reused.
  virtual void reset() = 0;

  // Every member of program group `group` has arrived at this collective.
  virtual void begin_collective(TimeNs now, uint64_t token, int32_t group, ir::CollectiveKind kind,
                                int64_t bytes) = 0;
  // Both sides of a point-to-point transfer between global ranks have posted.
  virtual void begin_transfer(TimeNs now, uint64_t token, int32_t src_rank, int32_t dst_rank, int64_t bytes) = 0;
  // The engine popped the completion it was last told for `token`.
  virtual void end(TimeNs now, uint64_t token) = 0;

  // Completion times decided or changed by the calls since the last take:
  // every begun token appears at least once before its end, and a later
  // update of a token replaces the earlier one. The span stays valid until the
  // next call on the model. The engine always takes before simulated time
  // moves on.
  virtual std::span<const CompletionUpdate> take_updates() = 0;
  // True when the model put work off to the next take (the flow network's
  // solve): the engine then takes at its settle event, after the other calls
  // at this time, so that one take answers them all. False: the engine takes
  // at once. Between a call and the take other operations may end; a model
  // that defers must leave those tokens out of the take (a token's index is
  // reused once it ended).
  virtual bool deferred() const { return false; }

  // Timed changes that no operation causes (a link going down or coming back,
  // docs/variability.md#links): a model that has them says so once
  // (uses_wakeups, asked when the engine is built), the engine asks
  // next_wakeup() after reset() and after every call, and calls wakeup(now)
  // at that time while any stream still has ops; its updates are taken as
  // after any call. TimeNs::max(): none pending.
  virtual bool uses_wakeups() const { return false; }
  virtual TimeNs next_wakeup() const { return TimeNs::max(); }
  virtual void wakeup(TimeNs /*now*/) {}
};

}  // namespace lacuna::engine
