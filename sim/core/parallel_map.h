// Runs f(0), ..., f(n - 1) on up to `jobs` threads and returns the results in
// index order, so the output does not depend on the thread count or on which
// thread ran what. A simple pool: each thread takes the next index from an
// atomic counter. If calls throw, the exception of the lowest failing index
// is rethrown after every thread has finished (the same one for any thread
// count, since every index still runs). `f` must be safe to call
// concurrently with different indices.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <exception>
#include <optional>
#include <thread>
#include <type_traits>
#include <vector>

namespace lacuna {

// `requested` > 0: that many; otherwise one per hardware thread (at least 1).
inline int resolve_jobs(int requested) {
  if (requested > 0) return requested;
  return static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
}

template <class F>
auto parallel_map(size_t n, int jobs, F&& f) -> std::vector<std::invoke_result_t<F&, size_t>> {
  using R = std::invoke_result_t<F&, size_t>;
  std::vector<std::optional<R>> slots(n);
  std::vector<std::exception_ptr> errors(n);
  std::atomic<size_t> next{0};
  auto worker = [&] {
    for (size_t i = next.fetch_add(1); i < n; i = next.fetch_add(1)) {
      try {
        slots[i].emplace(f(i));
      } catch (...) {
        errors[i] = std::current_exception();
      }
    }
  };
  const size_t threads = std::min<size_t>(n, static_cast<size_t>(std::max(1, jobs)));
  std::vector<std::thread> pool;
  for (size_t t = 1; t < threads; ++t) pool.emplace_back(worker);
  worker();  // the calling thread is one of them
  for (std::thread& t : pool) t.join();
  for (const std::exception_ptr& e : errors) {
    if (e) std::rethrow_exception(e);
  }
  std::vector<R> out;
  out.reserve(n);
  for (std::optional<R>& s : slots) out.push_back(std::move(*s));
  return out;
}

}  // namespace lacuna
