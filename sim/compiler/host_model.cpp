#include "sim/compiler/host_model.h"

#include <algorithm>
#include <cmath>
#include <vector>

namespace lacuna::compiler {
namespace {

int64_t ns_of(bool has, double us) { return has ? static_cast<int64_t>(std::llround(us * 1000.0)) : 0; }

bool in_pass(ir::Phase phase) {
  return phase == ir::FORWARD || phase == ir::BACKWARD_INPUT || phase == ir::BACKWARD_WEIGHT ||
         phase == ir::RECOMPUTE;
}

// A pass: one module's forward, or backward (B, W and recompute together),
// of one microbatch on one model chunk.
struct PassKey {
  int32_t module = -1, chunk = -1, microbatch = -1;
  bool forward = false;
  bool operator==(const PassKey&) const = default;
};

PassKey key_of(const ir::Op& op) {
  return {op.module(), op.chunk(), op.microbatch(), op.phase() == ir::FORWARD};
}

}  // namespace

void apply_host_model(ir::Program& program) {
  const auto& host = program.cluster().host();
  const int64_t kernel = ns_of(host.has_kernel_launch_us(), host.kernel_launch_us());
  const int64_t comm = ns_of(host.has_collective_launch_us(), host.collective_launch_us());
  const int64_t pass = ns_of(host.has_microbatch_overhead_us(), host.microbatch_overhead_us());
  const int64_t iteration = ns_of(host.has_iteration_overhead_us(), host.iteration_overhead_us());
  const bool timer_sync = program.info().execution().timer_sync();
  for (ir::RankClass& cls : *program.mutable_classes()) {
    // Events recorded by a receive stream that never waits (its irecvs are
    // posted ahead by the host, not handed over by the compute stream).
    std::vector<bool> free_receive(static_cast<size_t>(std::max(cls.num_events(), 0)), false);
    for (const ir::Stream& st : cls.streams()) {
      if (st.kind() != ir::PP_RECV) continue;
      bool waits = false;
      for (const ir::Op& op : st.ops()) waits |= op.has_wait();
      if (waits) continue;
      for (const ir::Op& op : st.ops())
        if (op.has_record() && op.record().event() >= 0 && op.record().event() < cls.num_events())
          free_receive[static_cast<size_t>(op.record().event())] = true;
    }
    for (ir::Stream& st : *cls.mutable_streams()) {
      if (st.kind() != ir::COMPUTE) continue;
      PassKey current;
      bool any_pass = false, after_passes = false;
      for (int i = 0; i < st.ops_size(); ++i) {
        ir::Op& op = *st.mutable_ops(i);
        int64_t ns = op.host_ns();
        if (op.has_compute()) ns += kernel;
        if (op.has_record()) ns += comm;
        if (op.has_wait() && op.wait().event() >= 0 && op.wait().event() < cls.num_events() &&
            free_receive[static_cast<size_t>(op.wait().event())])
          ns += comm;
        if (i == 0) ns += iteration;
        // A pass starts at its first kernel: the records and waits before
        // it (a receive, a blocking p2p call's hand-off) belong to the
        // communication around the pass, and Megatron's timers start
        // inside forward_step / backward_step, after the receive.
        if (in_pass(op.phase()) && op.has_compute()) {
          const PassKey k = key_of(op);
          if (!any_pass || !(k == current)) {
            ns += pass;
            if (timer_sync) op.set_host_sync(true);
            current = k;
            any_pass = true;
          }
        } else if (op.phase() == ir::OPTIMIZER_STEP && any_pass && !after_passes) {
          // The first op after the passes (the last timer's stop).
          if (timer_sync) op.set_host_sync(true);
          after_passes = true;
        }
        op.set_host_ns(ns);
      }
    }
  }
}

}  // namespace lacuna::compiler
