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
#include "sim/core/error.h"

namespace lacuna::runtime {
namespace {

using Clock = std::chrono::steady_clock;

// ---------------------------------------------------------------- the plan

enum class OpKind { kCompute, kCollective, kSend, kRecv, kRecord, kWait };

struct PlannedOp {
  OpKind kind = OpKind::kCompute;
  std::int64_t fixed_ns = 0;  // compute (scaled), collective, p2p (the send's, for a recv too)
  // compute
  int case_index = -1;  // into StreamPlan::computes; -1 for fixed durations
  double scale = 1.0;   // compute_time_scale applied to a real kernel (> 1 only)
  // collective
  CollectiveKind collective = CollectiveKind::kAllReduce;
  int group = -1;
  int member = 0;  // index of the rank in the group
  int group_size = 1;
  int root = 0;  // broadcast / reduce: the group's first rank
  // p2p
  int peer = -1;
  int channel = 0;
  std::int64_t tag = 0;
  // collective / p2p elements (floats)
  std::size_t elements = 0;
  // events
  int event = 0;
  std::int64_t value = 0;
  std::string label;  // "rank 0 stream 1 (tp_comm) op 12"
  std::string what;   // "all_reduce 4096 B on group 3", for reports
};

struct StreamPlan {
  int rank = 0;
  int stream = 0;
  std::string name;
  std::vector<PlannedOp> ops;
  std::vector<ir::Compute> computes;  // distinct (class, variant, shape) run by real kernels
  std::size_t buffer_a = 0;           // floats: collective / p2p buffer
  std::size_t buffer_b = 0;           // floats: all-to-all output, reduce output
};

CollectiveKind to_runtime(ir::CollectiveKind kind, const std::string& where) {
  switch (kind) {
    case ir::ALL_REDUCE: return CollectiveKind::kAllReduce;
    case ir::ALL_GATHER: return CollectiveKind::kAllGather;
    case ir::REDUCE_SCATTER: return CollectiveKind::kReduceScatter;
    case ir::ALL_TO_ALL: return CollectiveKind::kAllToAll;
    case ir::BROADCAST: return CollectiveKind::kBroadcast;
    case ir::REDUCE: return CollectiveKind::kReduce;
    default: throw Error(where + ": collective kind " + std::to_string(static_cast<int>(kind)) + " is not supported");
  }
}

std::string stream_label(int rank, int stream, const std::string& name) {
  return "rank " + std::to_string(rank) + " stream " + std::to_string(stream) + " (" + name + ")";
}

std::size_t float_count(std::int64_t bytes) { return static_cast<std::size_t>((bytes + 3) / 4); }

struct Plan {
  std::vector<int> ranks;  // executed, ascending
  std::vector<StreamPlan> streams;
  std::vector<int> num_events;  // per global rank (executed ones)
};

Plan make_plan(const ir::Program& program, const ExecuteOptions& options) {
  const int num_ranks = program.ranks_size();
  if (num_ranks == 0) throw Error("execute: the program has no ranks");
  if (options.iterations < 1) throw Error("execute: iterations must be >= 1, got " + std::to_string(options.iterations));
  if (options.timeout.count() <= 0) throw Error("execute: timeout must be > 0");

  Plan plan;
  std::vector<bool> selected(static_cast<std::size_t>(num_ranks), options.ranks.empty());
  for (int r : options.ranks) {
    if (r < 0 || r >= num_ranks) {
      throw Error("execute: rank " + std::to_string(r) + " is not in the program (ranks 0.." +
                  std::to_string(num_ranks - 1) + ")");
    }
    selected[static_cast<std::size_t>(r)] = true;
  }
  for (int r = 0; r < num_ranks; ++r) {
    if (selected[static_cast<std::size_t>(r)]) plan.ranks.push_back(r);
  }
  plan.num_events.assign(static_cast<std::size_t>(num_ranks), 0);

  for (int g = 0; g < program.groups_size(); ++g) {
    const auto& ranks = program.groups(g).ranks();
    for (int i = 0; i < ranks.size(); ++i) {
      if (ranks[i] < 0 || ranks[i] >= num_ranks || (i > 0 && ranks[i] <= ranks[i - 1])) {
        throw Error("execute: group " + std::to_string(g) + " must list ascending ranks in [0, " +
                    std::to_string(num_ranks) + ")");
      }
    }
  }

  // Sends' fixed durations per (src, dst, channel) in issue order, so that the
  // matching recv knows the transfer is fixed (the sender decides).
  std::map<std::tuple<int, int, int>, std::vector<std::int64_t>> send_fixed;
  std::map<std::tuple<int, int, int>, std::size_t> recv_seen;

  for (int r : plan.ranks) {
    const ir::RankBinding& binding = program.ranks(r);
    if (binding.class_id() < 0 || binding.class_id() >= program.classes_size()) {
      throw Error("execute: rank " + std::to_string(r) + " has class_id " + std::to_string(binding.class_id()) +
                  " but the program has " + std::to_string(program.classes_size()) + " classes");
    }
    const ir::RankClass& cls = program.classes(binding.class_id());
    plan.num_events[static_cast<std::size_t>(r)] = cls.num_events();
    const double scale =
        options.apply_compute_time_scale && binding.has_compute_time_scale() ? binding.compute_time_scale() : 1.0;
    if (!(scale > 0)) throw Error("execute: rank " + std::to_string(r) + " has compute_time_scale <= 0");

    for (int s = 0; s < cls.streams_size(); ++s) {
      const ir::Stream& stream = cls.streams(s);
      StreamPlan sp;
      sp.rank = r;
      sp.stream = s;
      sp.name = stream.name();
      std::map<std::string, int> case_of;
      for (int i = 0; i < stream.ops_size(); ++i) {
        const ir::Op& op = stream.ops(i);
        PlannedOp p;
        p.label = stream_label(r, s, sp.name) + " op " + std::to_string(i);
        auto resolve_group = [&](int slot) {
          if (slot < 0 || slot >= binding.group_size() || binding.group(slot) < 0 ||
              binding.group(slot) >= program.groups_size()) {
            throw Error("execute: " + p.label + " uses group slot " + std::to_string(slot) +
                        ", which rank " + std::to_string(r) + " does not bind to a group");
          }
          return binding.group(slot);
        };
        auto resolve_peer = [&](int slot) {
          if (slot < 0 || slot >= binding.peer_size() || binding.peer(slot) < 0 || binding.peer(slot) >= num_ranks ||
              binding.peer(slot) == r) {
            throw Error("execute: " + p.label + " uses peer slot " + std::to_string(slot) + ", which rank " +
                        std::to_string(r) + " does not bind to another rank");
          }
          const int peer = binding.peer(slot);
          if (!selected[static_cast<std::size_t>(peer)]) {
            throw Error(SourceLocation{}, "execute: " + p.label + " talks to rank " + std::to_string(peer) +
                        ", which is not executed", "add rank " + std::to_string(peer) + " to the executed ranks");
          }
          return peer;
        };
        switch (op.kind_case()) {
          case ir::Op::kCompute: {
            const ir::Compute& c = op.compute();
            p.kind = OpKind::kCompute;
            p.what = kernels::describe_op(c);
            if (c.fixed_duration_ns() > 0) {
              p.fixed_ns = static_cast<std::int64_t>(static_cast<double>(c.fixed_duration_ns()) * scale + 0.5);
            } else {
              const std::string key = p.what;
              auto it = case_of.find(key);
              if (it == case_of.end()) {
                it = case_of.emplace(key, static_cast<int>(sp.computes.size())).first;
                sp.computes.push_back(c);
              }
              p.case_index = it->second;
              p.scale = scale;
            }
            break;
          }
          case ir::Op::kCollective: {
            const ir::Collective& c = op.collective();
            p.kind = OpKind::kCollective;
            p.collective = to_runtime(c.kind(), p.label);
            p.group = resolve_group(c.group_slot());
            const auto& members = program.groups(p.group).ranks();
            p.group_size = members.size();
            auto pos = std::find(members.begin(), members.end(), r);
            if (pos == members.end()) {
              throw Error("execute: " + p.label + " runs a collective on group " + std::to_string(p.group) +
                          ", which does not contain rank " + std::to_string(r));
            }
            p.member = static_cast<int>(pos - members.begin());
            for (int m : members) {
              if (!selected[static_cast<std::size_t>(m)]) {
                throw Error(SourceLocation{}, "execute: " + p.label + " runs a collective on group " + std::to_string(p.group) +
                                " with rank " + std::to_string(m) + ", which is not executed",
                            "execute every member of the group");
              }
            }
            p.root = members[0];
            if (c.bytes() < 0) throw Error("execute: " + p.label + ": negative bytes");
            p.elements = float_count(c.bytes());
            if (p.collective == CollectiveKind::kAllGather || p.collective == CollectiveKind::kReduceScatter ||
                p.collective == CollectiveKind::kAllToAll) {
              const auto n = static_cast<std::size_t>(p.group_size);
              p.elements = (p.elements + n - 1) / n * n;
            }
            p.fixed_ns = c.fixed_duration_ns();
            p.what = std::string(to_string(p.collective)) + " " + std::to_string(c.bytes()) + " B on group " +
                     std::to_string(p.group);
            if (p.fixed_ns > 0) {
              sp.buffer_a = std::max<std::size_t>(sp.buffer_a, 1);
            } else {
              sp.buffer_a = std::max(sp.buffer_a, p.elements);
              if (p.collective == CollectiveKind::kAllToAll || p.collective == CollectiveKind::kReduce) {
                sp.buffer_b = std::max(sp.buffer_b, p.elements);
              }
            }
            break;
          }
          case ir::Op::kSend: {
            const ir::Send& m = op.send();
            p.kind = OpKind::kSend;
            p.peer = resolve_peer(m.peer_slot());
            p.channel = m.channel();
            p.tag = m.tag();
            if (m.bytes() < 0 || m.channel() < 0) throw Error("execute: " + p.label + ": negative bytes or channel");
            p.elements = float_count(m.bytes());
            p.fixed_ns = m.fixed_duration_ns();
            send_fixed[{r, p.peer, p.channel}].push_back(p.fixed_ns);
            p.what = "send " + std::to_string(m.bytes()) + " B to rank " + std::to_string(p.peer) + " channel " +
                     std::to_string(p.channel) + " tag " + std::to_string(p.tag);
            sp.buffer_a = std::max(sp.buffer_a, p.fixed_ns > 0 ? std::size_t{1} : p.elements);
            break;
          }
          case ir::Op::kRecv: {
            const ir::Recv& m = op.recv();
            p.kind = OpKind::kRecv;
            p.peer = resolve_peer(m.peer_slot());
            p.channel = m.channel();
            p.tag = m.tag();
            if (m.bytes() < 0 || m.channel() < 0) throw Error("execute: " + p.label + ": negative bytes or channel");
            p.elements = float_count(m.bytes());
            p.what = "recv " + std::to_string(m.bytes()) + " B from rank " + std::to_string(p.peer) + " channel " +
                     std::to_string(p.channel) + " tag " + std::to_string(p.tag);
            break;
          }
          case ir::Op::kRecord:
          case ir::Op::kWait: {
            const bool record = op.kind_case() == ir::Op::kRecord;
            p.kind = record ? OpKind::kRecord : OpKind::kWait;
            p.event = record ? op.record().event() : op.wait().event();
            p.value = record ? 0 : op.wait().value();
            if (p.event < 0 || p.event >= cls.num_events()) {
              throw Error("execute: " + p.label + " uses event " + std::to_string(p.event) + " but class '" +
                          cls.name() + "' has num_events = " + std::to_string(cls.num_events()));
            }
            p.what = record ? "record event " + std::to_string(p.event)
                            : "wait event " + std::to_string(p.event) + " >= " + std::to_string(p.value);
            break;
          }
          default: throw Error("execute: " + p.label + " has no kind");
        }
        sp.ops.push_back(std::move(p));
      }
      plan.streams.push_back(std::move(sp));
    }
  }

  // Second pass: recvs learn whether their matching send is fixed-duration
  // (matched in order per (src, dst, channel), streams of a rank in order).
  for (StreamPlan& sp : plan.streams) {
    for (PlannedOp& p : sp.ops) {
      if (p.kind != OpKind::kRecv) continue;
      const std::tuple<int, int, int> key{p.peer, sp.rank, p.channel};
      const std::size_t k = recv_seen[key]++;
      auto it = send_fixed.find(key);
      if (it != send_fixed.end() && k < it->second.size()) p.fixed_ns = it->second[k];
      sp.buffer_a = std::max(sp.buffer_a, p.fixed_ns > 0 ? std::size_t{1} : p.elements);
    }
  }
  return plan;
}

// ---------------------------------------------------------------- running

// Thrown inside a stream thread when the run was aborted by another failure.
struct Aborted {};

enum class State : int { kSetup, kRunning, kEventWait, kCommunicating, kBarrier, kDone };

const char* state_name(State s) {
  switch (s) {
    case State::kSetup: return "setting up";
    case State::kRunning: return "running";
    case State::kEventWait: return "waiting for an event in";
    case State::kCommunicating: return "in the communicator at";
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
                cases[static_cast<std::size_t>(p.case_index)]->run_once_ns();
                if (p.scale > 1.0) {
                  const auto ran = Clock::now() - ready;
                  sleep_until(Clock::now() + std::chrono::duration_cast<Clock::duration>(ran * (p.scale - 1.0)));
                }
              }
              break;
            }
            case OpKind::kCollective: {
              status.state.store(static_cast<int>(State::kCommunicating));
              const int r = sp.rank;
              if (p.fixed_ns > 0) {
                comm_.all_reduce(r, p.group, std::span<float>(&sync, 1), p.label);
                start = Clock::now();
                status.state.store(static_cast<int>(State::kRunning));
                sleep_until(start + std::chrono::nanoseconds(p.fixed_ns));
                break;
              }
              std::span<float> buf(a.data(), p.elements);
              const std::size_t block = p.elements / static_cast<std::size_t>(p.group_size);
              const std::size_t mine = block * static_cast<std::size_t>(p.member);
              switch (p.collective) {
                case CollectiveKind::kAllReduce: comm_.all_reduce(r, p.group, buf, p.label); break;
                case CollectiveKind::kAllGather:
                  comm_.all_gather(r, p.group, buf.subspan(mine, block), buf, p.label);
                  break;
                case CollectiveKind::kReduceScatter:
                  comm_.reduce_scatter(r, p.group, buf, buf.subspan(mine, block), p.label);
                  break;
                case CollectiveKind::kAllToAll:
                  comm_.all_to_all(r, p.group, buf, std::span<float>(b.data(), p.elements), p.label);
                  break;
                case CollectiveKind::kBroadcast: comm_.broadcast(r, p.group, p.root, buf, p.label); break;
                case CollectiveKind::kReduce:
                  comm_.reduce(r, p.group, p.root, buf,
                               r == p.root ? std::span<float>(b.data(), p.elements) : std::span<float>(), p.label);
                  break;
              }
              break;
            }
            case OpKind::kSend:
            case OpKind::kRecv: {
              status.state.store(static_cast<int>(State::kCommunicating));
              const bool send = p.kind == OpKind::kSend;
              std::span<float> buf = p.fixed_ns > 0 ? std::span<float>(&sync, 1) : std::span<float>(a.data(), p.elements);
              if (send) comm_.send(sp.rank, p.peer, p.channel, p.tag, buf, p.label);
              else comm_.recv(sp.rank, p.peer, p.channel, p.tag, buf, p.label);
              if (p.fixed_ns > 0) {
                start = Clock::now();
                status.state.store(static_cast<int>(State::kRunning));
                sleep_until(start + std::chrono::nanoseconds(p.fixed_ns));
              }
              break;
            }
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
  const Plan plan = make_plan(program, options);
  Run run(program, plan, options);
  return run.run();
}

}  // namespace lacuna::runtime
