// Internal to the compiler: a pipeline pass being emitted, as a coroutine.
// StageBuilder's forward and backward suspend after each TP, CP or EP
// collective they issue, so that an overlapped pair (DualPipe's F&B) can
// switch to its other pass there: one pass's collective then runs while the
// other's kernels occupy the compute stream, which is how DualPipe hides
// communication (DeepSeek-V3 report, §3.2.1). A pass run alone is resumed
// until it ends, emitting exactly what a plain function would.
#pragma once

#include <coroutine>
#include <exception>
#include <utility>

namespace lacuna::compiler {

class PassEmission {
 public:
  struct promise_type {
    PassEmission get_return_object() {
      return PassEmission(std::coroutine_handle<promise_type>::from_promise(*this));
    }
    // Lazy: nothing is emitted before the first step().
    std::suspend_always initial_suspend() noexcept { return {}; }
    std::suspend_always final_suspend() noexcept { return {}; }
    std::suspend_always yield_value(int) noexcept { return {}; }
    void return_void() noexcept {}
    void unhandled_exception() noexcept { error = std::current_exception(); }
    std::exception_ptr error;
  };

  explicit PassEmission(std::coroutine_handle<promise_type> h) : h_(h) {}
  PassEmission(PassEmission&& other) noexcept : h_(std::exchange(other.h_, {})) {}
  PassEmission(const PassEmission&) = delete;
  PassEmission& operator=(const PassEmission&) = delete;
  PassEmission& operator=(PassEmission&&) = delete;
  ~PassEmission() {
    if (h_) h_.destroy();
  }

  bool done() const { return h_.done(); }
  // Emits up to the pass's next collective, or to its end; rethrows what the
  // pass threw.
  void step() {
    h_.resume();
    if (h_.promise().error) std::rethrow_exception(std::exchange(h_.promise().error, nullptr));
  }
  void finish() {
    while (!done()) step();
  }

 private:
  std::coroutine_handle<promise_type> h_;
};

}  // namespace lacuna::compiler
