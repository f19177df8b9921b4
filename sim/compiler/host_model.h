// The host side of a compiled program (docs/engine.md#host,
// docs/cost-model.md#host-overheads): how long the framework's host thread
// takes to issue each op of a rank's compute stream, and where it waits for
// the GPU. Applied once to every program a compile path produces, so that
// every placement is costed alike.
#pragma once

#include "sim/proto/program.pb.h"

namespace lacuna::compiler {

// Sets Op.host_ns on the ops of every COMPUTE stream from cluster.host:
// - a compute kernel: kernel_launch_us;
// - an EventRecord (it hands a collective or a transfer to another stream:
//   one NCCL call or one batched p2p group): collective_launch_us;
// - an EventWait on a receive stream that runs free (overlapped p2p: the
//   host posted that irecv): collective_launch_us;
// - the first kernel of each pass (a forward or a backward of one microbatch
//   on one model chunk of one module; the records and waits of the
//   communication before it are not the pass): + microbatch_overhead_us;
// - the stream's first op: + iteration_overhead_us.
// With execution.timer_sync (Megatron-LM 2021–2022), the host also waits for
// the GPU (host_sync) at the first kernel of every pass and at the first
// optimizer-step op after the last pass (the timers' torch.cuda.synchronize()). Adds to host_ns
// already set; call it once per program.
void apply_host_model(ir::Program& program);

}  // namespace lacuna::compiler
