// make_cuda_backend() for builds without CUDA: a clear error, never a fake run.
#include "runtime/backend.h"
#include "runtime/cuda_backend.h"
#include "sim/core/error.h"

#ifndef LACUNA_HAVE_CUDA
namespace lacuna::runtime {

std::unique_ptr<Backend> make_cuda_backend() {
  throw Error(SourceLocation{}, "this lacuna was built without CUDA, so --backend cuda is not available",
              "rebuild with the CUDA toolkit (cmake -DLACUNA_CUDA=ON), or use --backend cpu");
}

}  // namespace lacuna::runtime
#endif
