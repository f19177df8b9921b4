// gpu::Context, gpu::DeviceBuffer and the availability checks. The CUDA
// runtime is used here directly (under LACUNA_HAVE_CUDA); without CUDA every
// constructor throws, so nothing else in gpu_*.cpp can be reached.
#include <cstring>
#include <string>
#include <vector>

#include "kernels/cublas_loader.h"
#include "kernels/gpu_kernels.h"
#include "kernels/gpu_launch.h"
#include "sim/core/error.h"

#ifdef LACUNA_HAVE_CUDA
#include <cuda_runtime.h>
#endif

namespace lacuna::kernels::gpu {

float round_to_bf16(float x) {
  uint32_t u = 0;
  std::memcpy(&u, &x, sizeof u);
  if ((u & 0x7fffffffu) > 0x7f800000u) return x;  // NaN: rounding could turn it into inf
  u += 0x7fffu + ((u >> 16) & 1u);                 // round to nearest, ties to even
  u &= 0xffff0000u;
  float r = 0.0f;
  std::memcpy(&r, &u, sizeof r);
  return r;
}

const char* dtype_name(DType t) {
  switch (t) {
    case DType::kBf16:
      return "bf16";
    case DType::kF32:
      return "f32";
    case DType::kI32:
      return "i32";
  }
  return "?";
}

int64_t dtype_bytes(DType t) { return t == DType::kBf16 ? 2 : 4; }

#ifdef LACUNA_HAVE_CUDA

namespace {

void check_cuda(cudaError_t e, const char* what) {
  if (e != cudaSuccess) throw Error(std::string("CUDA: ") + what + ": " + cudaGetErrorString(e));
}

// Why there is no usable GPU, or "" when there is one; never throws.
std::string probe() {
  int count = 0;
  const cudaError_t e = cudaGetDeviceCount(&count);
  if (e != cudaSuccess) {
    cudaGetLastError();  // reset the last-error state so later calls start clean
    return std::string("no GPU: cudaGetDeviceCount: ") + cudaGetErrorString(e);
  }
  if (count == 0) return "no GPU: the CUDA runtime reports 0 devices";
  std::string why;
  if (!cublas_loadable(&why)) return why;
  return {};
}

const std::string& probe_once() {
  static const std::string why = probe();
  return why;
}

}  // namespace

bool gpu_available() {
  try {
    return probe_once().empty();
  } catch (...) {
    return false;
  }
}

std::string gpu_unavailable_reason() {
  try {
    return probe_once();
  } catch (...) {
    return "GPU probe failed";
  }
}

struct Context::Impl {
  int device = 0;
  cudaStream_t stream = nullptr;
  cudaEvent_t start = nullptr;
  cudaEvent_t stop = nullptr;
  cublasHandle_t blas = nullptr;
  std::string name;
  int64_t l2_bytes = 0;
  int sm_count = 0;
  int cublas_version = 0;
  std::string cublas_path;

  ~Impl() {
    // Best effort: a destructor must not throw, and a failing release here
    // means the device is already gone.
    if (blas != nullptr) cublas_api().destroy(blas);
    if (start != nullptr) cudaEventDestroy(start);
    if (stop != nullptr) cudaEventDestroy(stop);
    if (stream != nullptr) cudaStreamDestroy(stream);
  }
};

Context::Context(int device) : impl_(std::make_unique<Impl>()) {
  // impl_ exists before anything is created, so a throw below releases what was.
  if (const std::string& why = probe_once(); !why.empty()) throw Error(why);
  int count = 0;
  check_cuda(cudaGetDeviceCount(&count), "cudaGetDeviceCount");
  if (device < 0 || device >= count)
    throw Error("GPU index " + std::to_string(device) + " out of range: " + std::to_string(count) +
                " device(s) present");
  const CublasApi& blas = cublas_api();
  Impl& m = *impl_;
  m.device = device;
  check_cuda(cudaSetDevice(device), "cudaSetDevice");
  cudaDeviceProp prop{};
  check_cuda(cudaGetDeviceProperties(&prop, device), "cudaGetDeviceProperties");
  m.name = prop.name;
  m.sm_count = prop.multiProcessorCount;
  int l2 = 0;
  check_cuda(cudaDeviceGetAttribute(&l2, cudaDevAttrL2CacheSize, device), "cudaDeviceGetAttribute(L2)");
  m.l2_bytes = l2;
  // Non-blocking: the legacy default stream (used by other libraries) does not serialise with ours.
  check_cuda(cudaStreamCreateWithFlags(&m.stream, cudaStreamNonBlocking), "cudaStreamCreateWithFlags");
  check_cuda(cudaEventCreate(&m.start), "cudaEventCreate");
  check_cuda(cudaEventCreate(&m.stop), "cudaEventCreate");
  cublasStatus_t st = blas.create(&m.blas);
  if (st != CUBLAS_STATUS_SUCCESS) {
    m.blas = nullptr;
    throw Error("cuBLAS (" + blas.path + "): cublasCreate: " + cublas_status_text(st));
  }
  st = blas.set_stream(m.blas, m.stream);
  if (st != CUBLAS_STATUS_SUCCESS) throw Error("cuBLAS: cublasSetStream: " + cublas_status_text(st));
  st = blas.set_math_mode(m.blas, CUBLAS_DEFAULT_MATH);
  if (st != CUBLAS_STATUS_SUCCESS) throw Error("cuBLAS: cublasSetMathMode: " + cublas_status_text(st));
  if (blas.get_version(m.blas, &m.cublas_version) != CUBLAS_STATUS_SUCCESS) m.cublas_version = 0;
  m.cublas_path = blas.path;
}

Context::~Context() = default;

int Context::device() const { return impl_->device; }
std::string Context::device_name() const { return impl_->name; }
int64_t Context::l2_cache_bytes() const { return impl_->l2_bytes; }
int Context::sm_count() const { return impl_->sm_count; }
void* Context::stream() const { return impl_->stream; }
void* Context::cublas_handle() const { return impl_->blas; }

int64_t Context::free_memory_bytes() const {
  check_cuda(cudaSetDevice(impl_->device), "cudaSetDevice");
  size_t free_b = 0, total_b = 0;
  check_cuda(cudaMemGetInfo(&free_b, &total_b), "cudaMemGetInfo");
  return static_cast<int64_t>(free_b);
}

std::string Context::cublas_description() const {
  return impl_->cublas_path + " (version " + std::to_string(impl_->cublas_version) + ")";
}

void Context::synchronize() { check_cuda(cudaStreamSynchronize(impl_->stream), "cudaStreamSynchronize"); }

double Context::time_ns(const std::function<void()>& launch) {
  check_cuda(cudaEventRecord(impl_->start, impl_->stream), "cudaEventRecord(start)");
  launch();
  check_cuda(cudaEventRecord(impl_->stop, impl_->stream), "cudaEventRecord(stop)");
  // Also surfaces faults inside the kernels just run.
  check_cuda(cudaEventSynchronize(impl_->stop), "cudaEventSynchronize (a kernel in the timed launch failed)");
  float ms = 0.0f;
  check_cuda(cudaEventElapsedTime(&ms, impl_->start, impl_->stop), "cudaEventElapsedTime");
  return ms > 0.0f ? static_cast<double>(ms) * 1e6 : 0.0;
}

// ---------------------------------------------------------------- DeviceBuffer

DeviceBuffer::DeviceBuffer(Context& ctx, DType dtype, int64_t elements) : ctx_(&ctx), dtype_(dtype) {
  if (elements < 1) throw Error("gpu::DeviceBuffer: " + std::to_string(elements) + " elements; need >= 1");
  check_cuda(cudaSetDevice(ctx.device()), "cudaSetDevice");
  const size_t bytes = static_cast<size_t>(elements) * static_cast<size_t>(dtype_bytes(dtype));
  void* p = nullptr;
  const cudaError_t e = cudaMalloc(&p, bytes);
  if (e != cudaSuccess) {
    cudaGetLastError();  // an out-of-memory error is not sticky; clear it
    throw Error("CUDA: cudaMalloc of " + std::to_string(bytes) + " bytes (" + std::to_string(elements) + " " +
                dtype_name(dtype) + ") on " + ctx.device_name() + ": " + cudaGetErrorString(e));
  }
  ptr_ = p;
  elements_ = elements;
}

DeviceBuffer::~DeviceBuffer() {
  if (ptr_ != nullptr) cudaFree(ptr_);  // synchronises with the device; errors ignored in a destructor
}

DeviceBuffer::DeviceBuffer(DeviceBuffer&& o) noexcept
    : ctx_(o.ctx_), dtype_(o.dtype_), elements_(o.elements_), ptr_(o.ptr_) {
  o.ptr_ = nullptr;
  o.elements_ = 0;
}

DeviceBuffer& DeviceBuffer::operator=(DeviceBuffer&& o) noexcept {
  if (this != &o) {
    if (ptr_ != nullptr) cudaFree(ptr_);
    ctx_ = o.ctx_;
    dtype_ = o.dtype_;
    elements_ = o.elements_;
    ptr_ = o.ptr_;
    o.ptr_ = nullptr;
    o.elements_ = 0;
  }
  return *this;
}

namespace {

void need_allocated(const DeviceBuffer& b, const char* fn) {
  if (b.empty()) throw Error(std::string("gpu::DeviceBuffer::") + fn + ": the buffer is not allocated");
}

void need_count(const DeviceBuffer& b, size_t n, const char* fn) {
  if (static_cast<int64_t>(n) != b.size())
    throw Error(std::string("gpu::DeviceBuffer::") + fn + ": " + std::to_string(n) + " host values for " +
                std::to_string(b.size()) + " device elements");
}

}  // namespace

void DeviceBuffer::upload(std::span<const float> values) {
  need_allocated(*this, "upload");
  need_count(*this, values.size(), "upload");
  if (dtype_ == DType::kI32) throw Error("gpu::DeviceBuffer::upload: floats into an i32 buffer");
  auto stream = static_cast<cudaStream_t>(ctx_->stream());
  if (dtype_ == DType::kF32) {
    check_cuda(cudaMemcpyAsync(ptr_, values.data(), values.size_bytes(), cudaMemcpyHostToDevice, stream),
               "cudaMemcpyAsync (upload)");
  } else {
    std::vector<uint16_t> bits(values.size());
    for (size_t i = 0; i < values.size(); ++i) {
      const float r = round_to_bf16(values[i]);
      uint32_t u = 0;
      std::memcpy(&u, &r, sizeof u);
      bits[i] = static_cast<uint16_t>(u >> 16);
    }
    check_cuda(cudaMemcpyAsync(ptr_, bits.data(), bits.size() * 2, cudaMemcpyHostToDevice, stream),
               "cudaMemcpyAsync (upload)");
    // `bits` dies at return: wait for the copy first.
  }
  check_cuda(cudaStreamSynchronize(stream), "cudaStreamSynchronize (upload)");
}

void DeviceBuffer::upload(std::span<const int32_t> values) {
  need_allocated(*this, "upload");
  need_count(*this, values.size(), "upload");
  if (dtype_ != DType::kI32) throw Error("gpu::DeviceBuffer::upload: integers into a floating-point buffer");
  auto stream = static_cast<cudaStream_t>(ctx_->stream());
  check_cuda(cudaMemcpyAsync(ptr_, values.data(), values.size_bytes(), cudaMemcpyHostToDevice, stream),
             "cudaMemcpyAsync (upload)");
  check_cuda(cudaStreamSynchronize(stream), "cudaStreamSynchronize (upload)");
}

std::vector<float> DeviceBuffer::download() const {
  need_allocated(*this, "download");
  if (dtype_ == DType::kI32) throw Error("gpu::DeviceBuffer::download: an i32 buffer (use download_i32)");
  auto stream = static_cast<cudaStream_t>(ctx_->stream());
  std::vector<float> out(static_cast<size_t>(elements_));
  if (dtype_ == DType::kF32) {
    check_cuda(cudaMemcpyAsync(out.data(), ptr_, out.size() * 4, cudaMemcpyDeviceToHost, stream),
               "cudaMemcpyAsync (download)");
    check_cuda(cudaStreamSynchronize(stream), "cudaStreamSynchronize (download)");
    return out;
  }
  std::vector<uint16_t> bits(out.size());
  check_cuda(cudaMemcpyAsync(bits.data(), ptr_, bits.size() * 2, cudaMemcpyDeviceToHost, stream),
             "cudaMemcpyAsync (download)");
  check_cuda(cudaStreamSynchronize(stream), "cudaStreamSynchronize (download)");
  for (size_t i = 0; i < out.size(); ++i) {
    const uint32_t u = static_cast<uint32_t>(bits[i]) << 16;  // bf16 → f32 is exact
    std::memcpy(&out[i], &u, sizeof u);
  }
  return out;
}

std::vector<int32_t> DeviceBuffer::download_i32() const {
  need_allocated(*this, "download_i32");
  if (dtype_ != DType::kI32) throw Error("gpu::DeviceBuffer::download_i32: not an i32 buffer");
  auto stream = static_cast<cudaStream_t>(ctx_->stream());
  std::vector<int32_t> out(static_cast<size_t>(elements_));
  check_cuda(cudaMemcpyAsync(out.data(), ptr_, out.size() * 4, cudaMemcpyDeviceToHost, stream),
             "cudaMemcpyAsync (download)");
  check_cuda(cudaStreamSynchronize(stream), "cudaStreamSynchronize (download)");
  return out;
}

void DeviceBuffer::fill_random(uint64_t seed, float lo, float hi, bool signed_values) {
  need_allocated(*this, "fill_random");
  if (dtype_ == DType::kI32) throw Error("gpu::DeviceBuffer::fill_random: an i32 buffer (use fill_indices)");
  // bf16 keeps 8 exponent bits: any lo >= 1e-30 stays non-zero after rounding.
  if (!(lo >= 1e-30f && lo <= hi))
    throw Error("gpu::DeviceBuffer::fill_random: need 1e-30 <= lo <= hi, got lo " + std::to_string(lo) + ", hi " +
                std::to_string(hi));
  const int code = launch::fill_random(ctx_->stream(), ptr_, dtype_ == DType::kBf16 ? 0 : 1, elements_, seed, lo, hi,
                                       signed_values);
  if (code != 0) throw Error(std::string("CUDA kernel fill_random failed: ") + launch::error_string(code));
}

void DeviceBuffer::fill_indices(uint64_t seed, int32_t bound) {
  need_allocated(*this, "fill_indices");
  if (dtype_ != DType::kI32) throw Error("gpu::DeviceBuffer::fill_indices: not an i32 buffer");
  if (bound < 1) throw Error("gpu::DeviceBuffer::fill_indices: bound " + std::to_string(bound) + " < 1");
  const int code = launch::fill_indices(ctx_->stream(), static_cast<int32_t*>(ptr_), elements_, seed, bound);
  if (code != 0) throw Error(std::string("CUDA kernel fill_indices failed: ") + launch::error_string(code));
}

void DeviceBuffer::zero() {
  need_allocated(*this, "zero");
  check_cuda(cudaMemsetAsync(ptr_, 0, static_cast<size_t>(bytes()), static_cast<cudaStream_t>(ctx_->stream())),
             "cudaMemsetAsync");
}

#else  // ---------------------------------------------------------------- built without CUDA

namespace {
constexpr const char* kNoCuda = "this lacuna was built without CUDA (no nvcc at configure time)";
}

bool gpu_available() { return false; }
std::string gpu_unavailable_reason() { return kNoCuda; }

struct Context::Impl {};

Context::Context(int) { throw Error(kNoCuda); }
Context::~Context() = default;
int Context::device() const { return 0; }
std::string Context::device_name() const { return {}; }
int64_t Context::l2_cache_bytes() const { return 0; }
int64_t Context::free_memory_bytes() const { return 0; }
int Context::sm_count() const { return 0; }
std::string Context::cublas_description() const { return {}; }
void Context::synchronize() {}
double Context::time_ns(const std::function<void()>&) { throw Error(kNoCuda); }
void* Context::stream() const { return nullptr; }
void* Context::cublas_handle() const { return nullptr; }

DeviceBuffer::DeviceBuffer(Context&, DType, int64_t) { throw Error(kNoCuda); }
DeviceBuffer::~DeviceBuffer() = default;
DeviceBuffer::DeviceBuffer(DeviceBuffer&& o) noexcept
    : ctx_(o.ctx_), dtype_(o.dtype_), elements_(o.elements_), ptr_(o.ptr_) {}
DeviceBuffer& DeviceBuffer::operator=(DeviceBuffer&&) noexcept { return *this; }
void DeviceBuffer::upload(std::span<const float>) { throw Error(kNoCuda); }
void DeviceBuffer::upload(std::span<const int32_t>) { throw Error(kNoCuda); }
std::vector<float> DeviceBuffer::download() const { throw Error(kNoCuda); }
std::vector<int32_t> DeviceBuffer::download_i32() const { throw Error(kNoCuda); }
void DeviceBuffer::fill_random(uint64_t, float, float, bool) { throw Error(kNoCuda); }
void DeviceBuffer::fill_indices(uint64_t, int32_t) { throw Error(kNoCuda); }
void DeviceBuffer::zero() { throw Error(kNoCuda); }

#endif

}  // namespace lacuna::kernels::gpu
