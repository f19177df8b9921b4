// What GPUs this machine has, for the CUDA backend (CUDA builds only). Both
// initialise CUDA in the calling process: the backend calls them in a
// forked child (runtime/cuda_launch.h run_in_child) when it may still fork
// its rank processes afterwards.
#pragma once

#include <string>

namespace lacuna::runtime {

// cudaGetDeviceCount; 0 with `why` set when there is no usable GPU.
int local_gpu_count(std::string& why);

// "NVIDIA H100 80GB HBM3 (device 0 of 8): 132 SMs, 79.1 GiB, driver 13.0,
// runtime 13.0; NCCL 2.28.9 (libnccl.so.2)"; throws lacuna::Error when there
// is no GPU.
std::string describe_cuda_device(int device);

}  // namespace lacuna::runtime
