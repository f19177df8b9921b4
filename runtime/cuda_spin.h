// The CUDA backend's timing kernels (runtime/cuda_spin.cu), behind a plain
// C++ interface like kernels/gpu_launch.h: the stream is a cudaStream_t as
// void*, each returns the CUDA error code after the launch (0 = success).
// All run one thread and read %globaltimer (ns, device-wide), so that a
// deadline set relative to the iteration's t0 holds on every stream.
// Only defined in CUDA builds; only the CUDA backend calls them.
#pragma once

#include <cstdint>

namespace lacuna::runtime::cuda {

// *slot = %globaltimer: t0 at an iteration's start, or the stamp before a
// compute op that stretch() lengthens.
int launch_stamp(void* stream, std::uint64_t* slot);

// Spins until max(now, *t0 + offset_ns) + duration_ns; with t0 == nullptr
// until now + duration_ns. Returns early when *abort != 0 (host-mapped
// memory the host sets on a failure so that a spinning stream drains).
// Replay's emulated communication (runtime/replay.h) and fixed durations.
int launch_spin(void* stream, const std::uint64_t* t0, std::int64_t offset_ns, std::int64_t duration_ns,
                const volatile int* abort);

// compute_time_scale > 1: called right after a kernel that followed
// launch_stamp(stamp); spins for (now - *stamp) · extra more, so the op lasts
// scale = 1 + extra times the kernel.
int launch_stretch(void* stream, const std::uint64_t* stamp, double extra, const volatile int* abort);

const char* error_string(int code);

}  // namespace lacuna::runtime::cuda
