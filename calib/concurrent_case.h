// A CPU kernel measured while other cores run the same kernel (`lacuna
// calibrate --cpu --concurrency N`): N − 1 background threads, each with its
// own copy of the case (own inputs), run it in a loop for as long as the
// point is measured; the timed thread's runs are the measurement. This is the
// state of `lacuna execute --backend cpu --compute-slots N` with every slot
// busy: kernels share the memory bandwidth, the caches and (with SMT) the
// cores, and run slower than alone (docs/calibration.md, docs/executor.md).
#pragma once

#include <functional>
#include <memory>

#include "kernels/kernel_case.h"

namespace lacuna::calibrate {

using CaseMaker = std::function<std::unique_ptr<kernels::KernelCase>()>;

// `make` is called `concurrency` times (on this thread, before any thread
// starts). concurrency 1 returns the plain case. Errors of a background copy
// are raised by the next run_once_ns(). The background threads stop and join
// when the case is destroyed.
std::unique_ptr<kernels::KernelCase> make_concurrent_case(const CaseMaker& make, int concurrency);

}  // namespace lacuna::calibrate
