#include "calib/concurrent_case.h"

#include <atomic>
#include <exception>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "sim/core/error.h"

namespace lacuna::calibrate {
namespace {

class ConcurrentCase final : public kernels::KernelCase {
 public:
  ConcurrentCase(std::unique_ptr<kernels::KernelCase> timed, std::vector<std::unique_ptr<kernels::KernelCase>> load)
      : timed_(std::move(timed)), load_(std::move(load)) {
    threads_.reserve(load_.size());
    for (auto& c : load_) {
      kernels::KernelCase* kc = c.get();
      threads_.emplace_back([this, kc] {
        while (!stop_.load(std::memory_order_relaxed)) {
          try {
            kc->run_once_ns();
          } catch (const std::exception& e) {
            std::lock_guard lock(mu_);
            if (error_.empty()) error_ = e.what();
            return;
          }
        }
      });
    }
  }

  ~ConcurrentCase() override {
    stop_.store(true);
    for (std::thread& t : threads_) t.join();
  }

  double run_once_ns() override {
    {
      std::lock_guard lock(mu_);
      if (!error_.empty()) throw Error("a concurrent copy of " + timed_->describe() + " failed: " + error_);
    }
    return timed_->run_once_ns();
  }

  std::string describe() const override {
    return timed_->describe() + " (with " + std::to_string(load_.size()) + " concurrent copies)";
  }

  int64_t resident_bytes() const override {
    int64_t total = timed_->resident_bytes();
    for (const auto& c : load_) total += c->resident_bytes();
    return total;
  }

 private:
  std::unique_ptr<kernels::KernelCase> timed_;
  std::vector<std::unique_ptr<kernels::KernelCase>> load_;
  std::vector<std::thread> threads_;
  std::atomic<bool> stop_{false};
  std::mutex mu_;
  std::string error_;
};

}  // namespace

std::unique_ptr<kernels::KernelCase> make_concurrent_case(const CaseMaker& make, int concurrency) {
  if (concurrency < 1) throw Error("calibrate: --concurrency must be >= 1, got " + std::to_string(concurrency));
  std::unique_ptr<kernels::KernelCase> timed = make();
  if (concurrency == 1) return timed;
  std::vector<std::unique_ptr<kernels::KernelCase>> load;
  for (int i = 1; i < concurrency; ++i) load.push_back(make());
  return std::make_unique<ConcurrentCase>(std::move(timed), std::move(load));
}

}  // namespace lacuna::calibrate
