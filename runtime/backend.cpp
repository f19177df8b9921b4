#include "runtime/backend.h"

#include <string>
#include <thread>

#include "runtime/cuda_backend.h"
#include "sim/core/error.h"

namespace lacuna::runtime {
namespace {

class CpuBackend final : public Backend {
 public:
  std::string_view name() const override { return "cpu"; }
  std::string device_description() const override {
    return "CPU: " + std::to_string(std::thread::hardware_concurrency()) +
           " hardware threads, float32 reference kernels, in-process communicator";
  }
  ExecutionResult execute(const ir::Program& program, const ExecuteOptions& options) override {
    return runtime::execute(program, options);
  }
};

}  // namespace

std::unique_ptr<Backend> make_cpu_backend() { return std::make_unique<CpuBackend>(); }

std::unique_ptr<Backend> make_backend(std::string_view name) {
  if (name == "cpu") return make_cpu_backend();
  if (name == "cuda") return make_cuda_backend();
  throw Error("unknown backend '" + std::string(name) + "': expected cpu or cuda");
}

}  // namespace lacuna::runtime
