// What runs a program for real. Two backends execute the same plan
// (runtime/plan.h) and return the same ExecutionResult, so `lacuna execute`
// writes one trace / JSON format whatever ran it (docs/executor.md):
// - "cpu": every stream of every rank a thread, the CPU reference kernels of
//   kernels/, the in-process communicator (runtime/executor.h);
// - "cuda": CUDA streams and events per rank, the CUDA kernels and cuBLAS
//   calls of kernels/, NCCL; one process per local GPU, or one GPU replaying
//   one rank (runtime/cuda_backend.h).
#pragma once

#include <memory>
#include <string>
#include <string_view>

#include "runtime/executor.h"
#include "sim/proto/program.pb.h"

namespace lacuna::runtime {

class Backend {
 public:
  virtual ~Backend() = default;
  // "cpu", "cuda".
  virtual std::string_view name() const = 0;
  // What ran it, for reports: e.g. "CPU: 2 hardware threads, float32 reference
  // kernels, in-process communicator".
  virtual std::string device_description() const = 0;
  // Runs `program`; throws lacuna::Error for bad input and for any failure
  // (deadlock, mismatch, device error) with a report. Never hangs.
  virtual ExecutionResult execute(const ir::Program& program, const ExecuteOptions& options) = 0;
  // False in the processes of a multi-process run that must not write the
  // outputs (under mpirun: every world rank but 0, which holds every rank's
  // spans).
  virtual bool primary_process() const { return true; }
};

std::unique_ptr<Backend> make_cpu_backend();

// "cpu" or "cuda"; anything else, or "cuda" in a build without CUDA, is a
// lacuna::Error that says why.
std::unique_ptr<Backend> make_backend(std::string_view name);

}  // namespace lacuna::runtime
