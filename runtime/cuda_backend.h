// The CUDA backend (runtime/backend.h): CUDA streams and events per rank, the
// CUDA kernels and cuBLAS calls of kernels/, NCCL for collectives and p2p.
// In a build without CUDA (LACUNA_HAVE_CUDA undefined) make_cuda_backend()
// throws a lacuna::Error saying so.
#pragma once

#include <memory>

namespace lacuna::runtime {

class Backend;

std::unique_ptr<Backend> make_cuda_backend();

}  // namespace lacuna::runtime
