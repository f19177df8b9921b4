#include "calib/device_query.h"

#include <sys/utsname.h>
#include <unistd.h>

#include <fstream>
#include <string>
#include <thread>

#include <fmt/format.h>

#include "sim/core/error.h"

#ifdef LACUNA_HAVE_CUDA
#include <cuda_runtime.h>
#endif

namespace lacuna::calibrate {
namespace {

std::string trim(std::string s) {
  const auto b = s.find_first_not_of(" \t");
  const auto e = s.find_last_not_of(" \t\r\n");
  return b == std::string::npos ? std::string() : s.substr(b, e - b + 1);
}

// The value of the first "key : value" line of /proc/cpuinfo with this key.
std::string cpuinfo_field(const std::string& key) {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line)) {
    const auto colon = line.find(':');
    if (colon == std::string::npos) continue;
    if (trim(line.substr(0, colon)) == key) return trim(line.substr(colon + 1));
  }
  return {};
}

int64_t read_int_file(const char* path) {
  std::ifstream in(path);
  int64_t v = 0;
  return (in >> v) ? v : 0;
}

}  // namespace

std::string cuda_version_string(int version) {
  if (version <= 0) return {};
  return fmt::format("{}.{}", version / 1000, (version % 1000) / 10);
}

calib::DeviceInfo cpu_device_info() {
  calib::DeviceInfo d;
  d.set_kind(calib::DeviceInfo::CPU);
  std::string name = cpuinfo_field("model name");
  if (name.empty()) name = cpuinfo_field("Model");        // some ARM kernels
  if (name.empty()) name = cpuinfo_field("cpu model");
  if (name.empty()) {
    struct utsname u {};
    name = ::uname(&u) == 0 ? std::string("CPU ") + u.machine : std::string("CPU");
  }
  d.set_name(name);
  long threads = ::sysconf(_SC_NPROCESSORS_ONLN);
  if (threads <= 0) threads = static_cast<long>(std::thread::hardware_concurrency());
  d.set_sm_count(static_cast<int32_t>(threads > 0 ? threads : 1));
  const long pages = ::sysconf(_SC_PHYS_PAGES), page = ::sysconf(_SC_PAGE_SIZE);
  if (pages > 0 && page > 0) d.set_memory_bytes(static_cast<int64_t>(pages) * page);
  // Nominal clock: base_frequency (intel_pstate) or cpuinfo_max_freq, in kHz;
  // else the "cpu MHz" /proc/cpuinfo reports now.
  int64_t khz = read_int_file("/sys/devices/system/cpu/cpu0/cpufreq/base_frequency");
  if (khz <= 0) khz = read_int_file("/sys/devices/system/cpu/cpu0/cpufreq/cpuinfo_max_freq");
  if (khz > 0) {
    d.set_sm_clock_mhz(static_cast<int32_t>(khz / 1000));
  } else {
    try {
      const std::string mhz = cpuinfo_field("cpu MHz");
      if (!mhz.empty()) d.set_sm_clock_mhz(static_cast<int32_t>(std::stod(mhz) + 0.5));
    } catch (...) {
    }
  }
  return d;
}

calib::DeviceInfo gpu_device_info(int device) {
#ifdef LACUNA_HAVE_CUDA
  const auto check = [](cudaError_t e, const char* what) {
    if (e != cudaSuccess) throw Error(fmt::format("CUDA {} failed: {}", what, cudaGetErrorString(e)));
  };
  cudaDeviceProp prop{};
  check(cudaGetDeviceProperties(&prop, device), "cudaGetDeviceProperties");
  calib::DeviceInfo d;
  d.set_kind(calib::DeviceInfo::GPU);
  d.set_name(prop.name);
  int driver = 0, runtime = 0;
  check(cudaDriverGetVersion(&driver), "cudaDriverGetVersion");
  check(cudaRuntimeGetVersion(&runtime), "cudaRuntimeGetVersion");
  d.set_driver_version(cuda_version_string(driver));
  d.set_runtime_version(cuda_version_string(runtime));
  int clock_khz = 0, mem_clock_khz = 0, sms = 0;
  check(cudaDeviceGetAttribute(&clock_khz, cudaDevAttrClockRate, device), "cudaDeviceGetAttribute(ClockRate)");
  check(cudaDeviceGetAttribute(&mem_clock_khz, cudaDevAttrMemoryClockRate, device),
        "cudaDeviceGetAttribute(MemoryClockRate)");
  check(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device),
        "cudaDeviceGetAttribute(MultiProcessorCount)");
  d.set_sm_clock_mhz(clock_khz / 1000);
  d.set_memory_clock_mhz(mem_clock_khz / 1000);
  d.set_sm_count(sms);
  d.set_memory_bytes(static_cast<int64_t>(prop.totalGlobalMem));
  d.set_compute_capability(prop.major * 10 + prop.minor);
  return d;
#else
  (void)device;
  throw Error(SourceLocation{}, "this lacuna was built without CUDA: no GPU device information",
              "rebuild with nvcc available (cmake -DLACUNA_CUDA=ON), or calibrate with --cpu");
#endif
}

}  // namespace lacuna::calibrate
