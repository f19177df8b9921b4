#include "runtime/executor.h"

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <span>
#include <sstream>
#include <string>
#include <thread>
#include <tuple>
#include <utility>

#include "kernels/cpu_case.h"
#include "runtime/communicator.h"
#include "runtime/memory_bound.h"
#include "runtime/plan.h"
#include "sim/core/error.h"

namespace lacuna::runtime {
namespace {

using Clock = std::chrono::steady_clock;

// ---------------------------------------------------------------- running

// Thrown inside a stream thread when the run was aborted by another failure.
struct Aborted {};

enum class State : int { kSetup, kRunning, kEventWait, kCommunicating, kComputeSlot, kBarrier, kDone };

const char* state_name(State s) {
  switch (s) {
    case State::kSetup: return "setting up";
    case State::kRunning: return "running";
    case State::kEventWait: return "waiting for an event in";
    case State::kCommunicating: return "in the communicator at";
    case State::kComputeSlot: return "waiting for a compute slot at";
    case State::kBarrier: return "at the iteration barrier after";
    case State::kDone: return "done";
  }
  return "?";
}

struct RankEvents {
  std::mutex mu;
  std::condition_variable cv;
  std::vector<std::int64_t> counters;
};

struct StreamStatus {
  std::atomic<int> op{-1};
  std::atomic<int> state{static_cast<int>(State::kSetup)};
};

class Run {
 public:
  Run(const ir::Program& program, const Plan& plan, const ExecuteOptions& options)
      : program_(program), plan_(plan), options_(options), comm_(make_comm(program, options)),
        statuses_(plan.streams.size()) {
    events_.resize(static_cast<std::size_t>(program.ranks_size()));
    for (int r : plan.ranks) {
      events_[static_cast<std::size_t>(r)] = std::make_unique<RankEvents>();
      events_[static_cast<std::size_t>(r)]->counters.assign(
          static_cast<std::size_t>(plan.num_events[static_cast<std::size_t>(r)]), 0);
    }
    barrier_total_ = static_cast<int>(plan.streams.size());
    free_slots_ = options.compute_slots;
  }

  ExecutionResult run() {
    std::vector<std::vector<ExecutedSpan>> spans(plan_.streams.size());
    {
      std::vector<std::thread> threads;
      threads.reserve(plan_.streams.size());
      for (std::size_t i = 0; i < plan_.streams.size(); ++i) {
        try {
          threads.emplace_back([this, i, &spans] { stream_main(i, spans[i]); });
        } catch (const std::exception& e) {
          fail(std::string("execute: could not start a thread: ") + e.what(), true);
          break;
        }
      }
      for (std::thread& t : threads) t.join();
    }
    if (aborted_.load()) {
      std::string message = primary_.empty() ? first_ : primary_;
      throw Error("execute failed: " + message + "\nwhat every stream was doing:\n" + report_);
    }
    ExecutionResult result;
    for (auto& v : spans) result.spans.insert(result.spans.end(), v.begin(), v.end());
    std::sort(result.spans.begin(), result.spans.end(), [](const ExecutedSpan& a, const ExecutedSpan& b) {
      return std::tie(a.iteration, a.rank, a.stream, a.op) < std::tie(b.iteration, b.rank, b.stream, b.op);
    });
    result.iteration_ns = iteration_ns_;
    for (const ExecutedSpan& s : result.spans) {
      if (s.iteration == options_.iterations - 1) result.end_ns = std::max(result.end_ns, s.end_ns);
    }
    result.ranks = plan_.ranks;
    result.bytes_moved = comm_.total_bytes_moved();
    result.emulated_ops = plan_.emulated_ops;
    return result;
  }

 private:
  static Communicator make_comm(const ir::Program& program, const ExecuteOptions& options);

  // Records a failure; the first one that is not a consequence of an abort is
  // the primary. Aborts the communicator and wakes every waiter.
  void fail(const std::string& message, bool primary) {
    {
      std::lock_guard lock(fail_mu_);
      if (first_.empty()) first_ = message;
      if (primary && primary_.empty()) {
        primary_ = message;
        report_ = status_report();
      } else if (report_.empty()) {
        report_ = status_report();
      }
    }
    aborted_.store(true);
    comm_.abort(message);
    for (auto& e : events_) {
      if (!e) continue;
      std::lock_guard lock(e->mu);
      e->cv.notify_all();
    }
    {
      std::lock_guard lock(slot_mu_);
      slot_cv_.notify_all();
    }
    std::lock_guard lock(barrier_mu_);
    barrier_cv_.notify_all();
  }

  std::string status_report() const {
    std::ostringstream out;
    for (std::size_t i = 0; i < plan_.streams.size(); ++i) {
      const StreamPlan& sp = plan_.streams[i];
      const auto state = static_cast<State>(statuses_[i].state.load());
      const int op = statuses_[i].op.load();
      out << "  " << stream_label(sp.rank, sp.stream, sp.name) << ": " << state_name(state);
      if (state != State::kSetup && state != State::kDone && op >= 0 && op < static_cast<int>(sp.ops.size())) {
        const PlannedOp& p = sp.ops[static_cast<std::size_t>(op)];
        out << " op " << op << " (" << p.what << ")";
        if (p.kind == OpKind::kWait && state == State::kEventWait) {
          std::lock_guard lock(events_[static_cast<std::size_t>(sp.rank)]->mu);
          out << ", counter at " << events_[static_cast<std::size_t>(sp.rank)]->counters[static_cast<std::size_t>(p.event)];
        }
      }
      out << "\n";
    }
    const std::string comm = comm_.waiting_report();
    if (!comm.empty()) out << "communicator:\n" << comm;
    return out.str();
  }

  // Returns the new iteration's start, or nothing when aborted. The last
  // arriver closes the previous iteration and resets the event counters.
  std::optional<Clock::time_point> barrier() {
    std::unique_lock lock(barrier_mu_);
    if (aborted_.load()) return std::nullopt;
    const std::int64_t gen = barrier_gen_;
    if (++barrier_count_ == barrier_total_) {
      const auto now = Clock::now();
      if (barrier_gen_ > 0) {
        iteration_ns_.push_back(std::chrono::duration_cast<std::chrono::nanoseconds>(now - t0_).count());
      }
      for (auto& e : events_) {
        if (!e) continue;
        std::lock_guard elock(e->mu);
        std::fill(e->counters.begin(), e->counters.end(), 0);
      }
      t0_ = now;
      barrier_count_ = 0;
      ++barrier_gen_;
      barrier_cv_.notify_all();
      return t0_;
    }
    barrier_cv_.wait(lock, [&] { return barrier_gen_ != gen || aborted_.load(); });
    if (barrier_gen_ == gen) return std::nullopt;
    return t0_;
  }

  void sleep_until(Clock::time_point deadline) const {
    using namespace std::chrono_literals;
    for (;;) {
      if (aborted_.load()) throw Aborted{};
      const auto now = Clock::now();
      if (now >= deadline) return;
      const auto left = deadline - now;
      if (left > 200us) {
        std::this_thread::sleep_for(std::min<Clock::duration>(left - 100us, 10ms));
      } else {
        std::this_thread::yield();
      }
    }
  }

  void acquire_compute_slot(StreamStatus& status) {
    if (options_.compute_slots <= 0) return;
    status.state.store(static_cast<int>(State::kComputeSlot));
    std::unique_lock lock(slot_mu_);
    slot_cv_.wait(lock, [&] { return free_slots_ > 0 || aborted_.load(); });
    if (aborted_.load()) throw Aborted{};
    --free_slots_;
    status.state.store(static_cast<int>(State::kRunning));
  }

  void release_compute_slot() {
    if (options_.compute_slots <= 0) return;
    std::lock_guard lock(slot_mu_);
    ++free_slots_;
    slot_cv_.notify_one();
  }

  // A real collective through the communicator; fixed-duration ones only
  // synchronise the members and then take their time. `start` is set when the
  // work is known to begin later than the op was reached.
  void run_collective(const PlannedOp& p, int r, std::vector<float>& a, std::vector<float>& b, float& sync,
                      StreamStatus& status, Clock::time_point& start) {
    status.state.store(static_cast<int>(State::kCommunicating));
    if (p.fixed_ns > 0) {
      start = comm_.all_reduce(r, p.group, std::span<float>(&sync, 1), p.label).started;
      status.state.store(static_cast<int>(State::kRunning));
      sleep_until(start + std::chrono::nanoseconds(p.fixed_ns));
      return;
    }
    std::span<float> buf(a.data(), p.elements);
    const std::size_t block = p.elements / static_cast<std::size_t>(p.group_size);
    const std::size_t mine = block * static_cast<std::size_t>(p.member);
    CallStats stats;
    switch (p.collective) {
      case CollectiveKind::kAllReduce: stats = comm_.all_reduce(r, p.group, buf, p.label); break;
      case CollectiveKind::kAllGather:
        stats = comm_.all_gather(r, p.group, buf.subspan(mine, block), buf, p.label);
        break;
      case CollectiveKind::kReduceScatter:
        stats = comm_.reduce_scatter(r, p.group, buf, buf.subspan(mine, block), p.label);
        break;
      case CollectiveKind::kAllToAll:
        stats = comm_.all_to_all(r, p.group, buf, std::span<float>(b.data(), p.elements), p.label);
        break;
      case CollectiveKind::kBroadcast: stats = comm_.broadcast(r, p.group, p.root, buf, p.label); break;
      case CollectiveKind::kReduce:
        stats = comm_.reduce(r, p.group, p.root, buf,
                             r == p.root ? std::span<float>(b.data(), p.elements) : std::span<float>(), p.label);
        break;
    }
    start = std::max(start, stats.started);
  }

  void run_p2p(const PlannedOp& p, int r, std::vector<float>& a, float& sync, StreamStatus& status,
               Clock::time_point& start) {
    status.state.store(static_cast<int>(State::kCommunicating));
    std::span<float> buf = p.fixed_ns > 0 ? std::span<float>(&sync, 1) : std::span<float>(a.data(), p.elements);
    const CallStats stats = p.kind == OpKind::kSend ? comm_.send(r, p.peer, p.channel, p.tag, buf, p.label)
                                                    : comm_.recv(r, p.peer, p.channel, p.tag, buf, p.label);
    start = std::max(start, stats.started);
    if (p.fixed_ns > 0) {
      status.state.store(static_cast<int>(State::kRunning));
      sleep_until(start + std::chrono::nanoseconds(p.fixed_ns));
    }
  }

  void stream_main(std::size_t index, std::vector<ExecutedSpan>& out) {
    const StreamPlan& sp = plan_.streams[index];
    StreamStatus& status = statuses_[index];
    int op_index = -1;
    try {
      // Setup, outside every timed region: kernel cases and buffers.
      std::vector<std::unique_ptr<kernels::CpuCase>> cases;
      for (const ir::Compute& c : sp.computes) {
        kernels::CpuCaseOptions copt;
        copt.seed = options_.seed;
        copt.max_sets = 1;
        cases.push_back(kernels::make_cpu_case(c, copt));
      }
      std::vector<float> a(sp.buffer_a, 0.0f);
      std::vector<float> b(sp.buffer_b, 0.0f);
      float sync = 0.0f;
      if (options_.keep_all_iterations) out.reserve(sp.ops.size() * static_cast<std::size_t>(options_.iterations));
      else out.reserve(sp.ops.size());
      RankEvents& events = *events_[static_cast<std::size_t>(sp.rank)];

      for (int it = 0; it < options_.iterations; ++it) {
        status.state.store(static_cast<int>(State::kBarrier));
        const auto t0 = barrier();
        if (!t0) return;
        const bool keep = options_.keep_all_iterations || it == options_.iterations - 1;
        auto rel = [&](Clock::time_point t) {
          return std::chrono::duration_cast<std::chrono::nanoseconds>(t - *t0).count();
        };
        for (op_index = 0; op_index < static_cast<int>(sp.ops.size()); ++op_index) {
          if (aborted_.load()) throw Aborted{};
          const PlannedOp& p = sp.ops[static_cast<std::size_t>(op_index)];
          status.op.store(op_index);
          status.state.store(static_cast<int>(State::kRunning));
          const auto ready = Clock::now();
          auto start = ready;
          std::optional<Clock::time_point> record_end;
          switch (p.kind) {
            case OpKind::kCompute: {
              if (p.case_index < 0) {
                sleep_until(ready + std::chrono::nanoseconds(p.fixed_ns));
              } else {
                // With compute slots, the op starts when it holds one: the
                // wait for a core is idle time, not kernel time.
                acquire_compute_slot(status);
                start = Clock::now();
                cases[static_cast<std::size_t>(p.case_index)]->run_once_ns();
                // Taken before the release, whose wake-up of another stream
                // may preempt this thread.
                const auto kernel_end = Clock::now();
                release_compute_slot();
                record_end = kernel_end;
                if (p.scale > 1.0) {
                  // A slower device: the stretch is part of the op (no slot held).
                  const auto ran = kernel_end - start;
                  sleep_until(kernel_end + std::chrono::duration_cast<Clock::duration>(ran * (p.scale - 1.0)));
                  record_end = Clock::now();
                }
              }
              break;
            }
            case OpKind::kCollective:
            case OpKind::kSend:
            case OpKind::kRecv:
              if (p.emulated) {
                status.state.store(static_cast<int>(State::kCommunicating));
                // Replay: the peers are the prediction (runtime/replay.h).
                start = std::max(ready, *t0 + std::chrono::nanoseconds(p.predicted.start_ns));
                sleep_until(start + std::chrono::nanoseconds(p.predicted.end_ns - p.predicted.start_ns));
                break;
              }
              if (p.kind == OpKind::kCollective) run_collective(p, sp.rank, a, b, sync, status, start);
              else run_p2p(p, sp.rank, a, sync, status, start);
              break;
            case OpKind::kRecord: {
              // The record's end is taken under the lock, before the counter
              // moves, so that no released wait can end before it.
              std::lock_guard lock(events.mu);
              record_end = Clock::now();
              ++events.counters[static_cast<std::size_t>(p.event)];
              events.cv.notify_all();
              break;
            }
            case OpKind::kWait: {
              status.state.store(static_cast<int>(State::kEventWait));
              std::unique_lock lock(events.mu);
              const auto& counter = events.counters[static_cast<std::size_t>(p.event)];
              const bool ok = events.cv.wait_for(lock, options_.timeout,
                                                 [&] { return counter >= p.value || aborted_.load(); });
              if (aborted_.load() && counter < p.value) throw Aborted{};
              if (!ok) {
                const std::int64_t at = counter;
                lock.unlock();
                throw Error("event wait timed out after " + std::to_string(options_.timeout.count()) + " ms: " +
                            p.label + " waits for event " + std::to_string(p.event) + " >= " +
                            std::to_string(p.value) + " (counter at " + std::to_string(at) + ")");
              }
              break;
            }
          }
          const auto end = record_end ? *record_end : Clock::now();
          if (keep) out.push_back({it, sp.rank, sp.stream, op_index, rel(ready), rel(start), rel(end)});
        }
      }
      status.state.store(static_cast<int>(State::kBarrier));
      barrier();
      status.state.store(static_cast<int>(State::kDone));
    } catch (const Aborted&) {
      // a consequence of another failure
    } catch (const CommError& e) {
      const bool primary = e.kind() != CommError::Kind::kAborted && !aborted_.load();
      fail(e.what(), primary || e.kind() == CommError::Kind::kTimeout || e.kind() == CommError::Kind::kMismatch);
    } catch (const std::exception& e) {
      std::string where = stream_label(sp.rank, sp.stream, sp.name);
      if (op_index >= 0 && op_index < static_cast<int>(sp.ops.size())) {
        where += " op " + std::to_string(op_index) + " (" + sp.ops[static_cast<std::size_t>(op_index)].what + ")";
      } else {
        where += " during setup";
      }
      const std::string what = e.what();
      fail(what.rfind("event wait timed out", 0) == 0 ? what : where + ": " + what, true);
    } catch (...) {
      fail(stream_label(sp.rank, sp.stream, sp.name) + ": unknown exception", true);
    }
  }

  const ir::Program& program_;
  const Plan& plan_;
  const ExecuteOptions& options_;
  Communicator comm_;
  std::vector<StreamStatus> statuses_;
  std::vector<std::unique_ptr<RankEvents>> events_;

  std::atomic<bool> aborted_{false};
  std::mutex fail_mu_;
  std::string first_, primary_, report_;

  std::mutex slot_mu_;
  std::condition_variable slot_cv_;
  int free_slots_ = 0;  // ExecuteOptions::compute_slots not in use

  std::mutex barrier_mu_;
  std::condition_variable barrier_cv_;
  int barrier_count_ = 0;
  int barrier_total_ = 0;
  std::int64_t barrier_gen_ = 0;
  Clock::time_point t0_{};
  std::vector<std::int64_t> iteration_ns_;
};

Communicator Run::make_comm(const ir::Program& program, const ExecuteOptions& options) {
  std::vector<std::vector<int>> groups;
  groups.reserve(static_cast<std::size_t>(program.groups_size()));
  for (const ir::Group& g : program.groups()) groups.emplace_back(g.ranks().begin(), g.ranks().end());
  CommunicatorOptions copt;
  copt.timeout = options.timeout;
  return Communicator(program.ranks_size(), std::move(groups), copt);
}

}  // namespace

ExecutionResult execute(const ir::Program& program, const ExecuteOptions& options) {
  if (options.iterations < 1) throw Error("execute: iterations must be >= 1, got " + std::to_string(options.iterations));
  if (options.compute_slots < 0) throw Error("execute: compute_slots must be >= 0 (0: no limit)");
  if (options.timeout.count() <= 0) throw Error("execute: timeout must be > 0");
  const Plan plan = make_plan(program, PlanOptions{.ranks = options.ranks,
                                                   .apply_compute_time_scale = options.apply_compute_time_scale,
                                                   .replay = options.replay});
  const std::int64_t kept = options.keep_all_iterations ? options.iterations : 1;
  check_memory(estimate_cpu_memory(plan, kept), Bytes(options.max_memory_bytes), "--max-host-memory-gb");
  Run run(program, plan, options);
  return run.run();
}

}  // namespace lacuna::runtime
