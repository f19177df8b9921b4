// One rank of a plan on one GPU: the CUDA backend's core (runtime/
// cuda_backend.h). CUDA builds only.
//
// - Every stream of the rank gets a gpu::Context (a non-blocking CUDA stream
//   and a cuBLAS handle); one host thread enqueues every op in the order of
//   runtime/enqueue_order.h, so each cudaStreamWaitEvent follows the
//   cudaEventRecord it waits for.
// - Compute: the op's kernel case (kernels/gpu_case.h, one input set);
//   fixed durations and replay's emulated communication: a spin kernel on
//   %globaltimer (runtime/cuda_spin.h); compute_time_scale > 1: a stamp
//   before and a stretch kernel after the case. Collectives and send/recv:
//   NCCL on bf16 buffers of `bytes` (runtime/cuda_nccl.h); fixed-duration
//   ones synchronise with one element, then spin.
// - Timing: a timed CUDA event before and after every op on its stream, read
//   relative to the iteration's start event (recorded on stream 0 right
//   after the kernel that writes t0; every other stream waits on it).
//   ready = the previous op's end on the stream (0 for the first), start =
//   the begin event (emulated ops: max(begin, predicted start), as the CPU
//   executor), end = the end event; ns rounded from cudaEventElapsedTime.
// - Iterations: enqueue, wait, read the events, next; the device is idle
//   between iterations. With several ranks, an all-reduce of one element on
//   the world communicator starts every iteration.
// - Watchdog: while the iteration runs the host polls the end events; when
//   no op finishes for `options.timeout` (or NCCL reports an asynchronous
//   error, or a kernel faults) it sets the spin kernels' abort flag, aborts
//   the NCCL communicators, drains the streams and throws lacuna::Error with
//   what every stream was doing.
#pragma once

#include "runtime/executor.h"
#include "runtime/plan.h"
#include "runtime/span_io.h"

namespace lacuna::runtime {

class NcclComms;

// `comms` may be null when the rank has no non-emulated communication.
// Throws lacuna::Error naming rank, stream and op on any failure.
RankOutcome run_rank_on_gpu(const Plan& plan, int rank, int device, const ExecuteOptions& options,
                            NcclComms* comms);

}  // namespace lacuna::runtime
