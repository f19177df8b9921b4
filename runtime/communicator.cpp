// In-process communicator (runtime/README.md has the algorithms and the
// synchronisation argument).
//
// Locks: one mutex + condition variable per group and per (src, dst, channel);
// `wait_mu` (the registry of waiting calls), `objects_mu` (the channel map) and
// `abort_mu` are leaves: nothing else is locked while one of them is held,
// except that the group/channel lock may be held while taking a leaf.
#include "runtime/communicator.h"

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <functional>
#include <map>
#include <mutex>
#include <set>
#include <utility>

#include "sim/ir/bound_program.h"

namespace lacuna::runtime {

std::string_view to_string(CollectiveKind kind) {
  switch (kind) {
    case CollectiveKind::kAllReduce: return "all_reduce";
    case CollectiveKind::kAllGather: return "all_gather";
    case CollectiveKind::kReduceScatter: return "reduce_scatter";
    case CollectiveKind::kAllToAll: return "all_to_all";
    case CollectiveKind::kBroadcast: return "broadcast";
    case CollectiveKind::kReduce: return "reduce";
  }
  return "unknown";
}

std::string_view to_string(CommError::Kind kind) {
  switch (kind) {
    case CommError::Kind::kInvalidArgument: return "invalid argument";
    case CommError::Kind::kMismatch: return "mismatch";
    case CommError::Kind::kTimeout: return "timeout";
    case CommError::Kind::kAborted: return "aborted";
  }
  return "unknown";
}

namespace {

using Clock = std::chrono::steady_clock;

int mod(std::int64_t a, int n) { return static_cast<int>(((a % n) + n) % n); }

// "0-3, 5, 7" (at most 16 runs, then "... (N in all)").
std::string format_ranks(const std::vector<int>& ranks) {
  std::string out;
  int runs = 0;
  for (std::size_t i = 0; i < ranks.size();) {
    std::size_t j = i;
    while (j + 1 < ranks.size() && ranks[j + 1] == ranks[j] + 1) ++j;
    if (runs == 16) {
      out += ", ... (" + std::to_string(ranks.size()) + " in all)";
      break;
    }
    if (runs > 0) out += ", ";
    out += std::to_string(ranks[i]);
    if (j == i + 1) out += ", " + std::to_string(ranks[j]);
    if (j > i + 1) out += "-" + std::to_string(ranks[j]);
    ++runs;
    i = j + 1;
  }
  return out;
}

std::string plural_ranks(const std::vector<int>& ranks) {
  return (ranks.size() == 1 ? "rank " : "ranks ") + format_ranks(ranks);
}

std::string with_label(std::string s, std::string_view label) {
  if (!label.empty()) {
    s += " [";
    s += label;
    s += "]";
  }
  return s;
}

// What a member called, as compared across members.
struct Desc {
  CollectiveKind kind = CollectiveKind::kAllReduce;
  std::int64_t count = 0;  // nccl-tests S in floats
  int root = -1;           // global rank (broadcast, reduce), else -1
  std::string invalid;     // non-empty: this call's own arguments are wrong
};

Desc make_desc(CollectiveKind kind, std::int64_t count, int root = -1) {
  Desc d;
  d.kind = kind;
  d.count = count;
  d.root = root;
  return d;
}

bool has_root(CollectiveKind k) { return k == CollectiveKind::kBroadcast || k == CollectiveKind::kReduce; }

std::string describe(const Desc& d) {
  std::string s = std::string(to_string(d.kind)) + " of " + std::to_string(d.count) + " floats";
  if (has_root(d.kind)) s += " from root " + std::to_string(d.root);
  return s;
}

struct Member {
  bool arrived = false;
  int rank = -1;
  Desc desc;
  std::string label;
  const float* in = nullptr;
  std::size_t in_n = 0;
  float* out = nullptr;
  std::size_t out_n = 0;
  std::vector<float> scratch;
  int done = 0;  // steps completed (running phase)
};

struct Instance {
  std::int64_t seq = 0;
  std::vector<Member> m;
  int arrived = 0;
  int left = 0;
  int first = -1;  // index of the first member to arrive
  bool all_arrived = false;
  std::chrono::steady_clock::time_point all_arrived_at{};  // when the last member arrived
  bool failed = false;
  CommError::Kind fail_kind = CommError::Kind::kMismatch;
  std::string error;
};

struct GroupState {
  int id = 0;
  std::vector<int> ranks;
  std::mutex mu;
  std::condition_variable cv;
  std::vector<std::int64_t> next_seq;  // per member index
  std::map<std::int64_t, std::shared_ptr<Instance>> instances;
};

struct Side {
  int rank = -1;
  std::int64_t tag = 0;
  std::size_t n = 0;
  const float* src = nullptr;  // send side
  float* dst = nullptr;        // recv side
  std::string label;
};

struct Transfer {
  std::int64_t seq = 0;
  bool has_send = false, has_recv = false;
  Side send, recv;
  bool matched = false;  // both sides present and compatible: the copy runs
  std::chrono::steady_clock::time_point matched_at{};
  bool done = false;     // the copy finished
  bool failed = false;
  CommError::Kind fail_kind = CommError::Kind::kMismatch;
  std::string error;
};

struct Channel {
  std::mutex mu;
  std::condition_variable cv;
  std::int64_t next_send = 0, next_recv = 0;
  std::map<std::int64_t, std::shared_ptr<Transfer>> pending;
};

enum class WaitType { kCollective, kSend, kRecv };

struct WaitEntry {
  int rank = -1;
  WaitType type = WaitType::kCollective;
  int group = -1;
  std::int64_t seq = -1;
  ir::P2pKey transfer;  // send / recv: the matching key
  std::string what;
  bool running = false;  // collective: every member arrived, data is moving
};

}  // namespace

struct Communicator::Impl {
  int num_ranks = 0;
  CommunicatorOptions options;
  std::vector<std::vector<int>> group_ranks;
  std::vector<std::unique_ptr<GroupState>> groups;

  std::mutex objects_mu;
  std::map<ir::P2pKey, std::unique_ptr<Channel>> channels;  // in-order matching per key

  std::atomic<bool> is_aborted{false};
  mutable std::mutex abort_mu;
  std::string reason;

  mutable std::mutex wait_mu;
  std::map<std::uint64_t, WaitEntry> waits;
  std::uint64_t next_wait = 0;

  std::atomic<std::int64_t> bytes_moved{0};

  // ------------------------------------------------------------ registry
  class Registration {
   public:
    Registration(Impl& impl, WaitEntry e) : impl_(impl) {
      std::lock_guard lk(impl_.wait_mu);
      id_ = impl_.next_wait++;
      impl_.waits.emplace(id_, std::move(e));
    }
    ~Registration() {
      std::lock_guard lk(impl_.wait_mu);
      impl_.waits.erase(id_);
    }
    void set_running() {
      std::lock_guard lk(impl_.wait_mu);
      impl_.waits.at(id_).running = true;
    }
    Registration(const Registration&) = delete;
    Registration& operator=(const Registration&) = delete;

   private:
    Impl& impl_;
    std::uint64_t id_ = 0;
  };

  static constexpr std::size_t kMaxReportedCalls = 64;

  // Every waiting call (the first kMaxReportedCalls, by rank), what it waits
  // for, and the ranks in no call.
  std::string report() const {
    std::lock_guard lk(wait_mu);
    std::vector<const WaitEntry*> entries;
    for (const auto& [id, e] : waits) entries.push_back(&e);
    std::stable_sort(entries.begin(), entries.end(),
                     [](const WaitEntry* a, const WaitEntry* b) { return a->rank < b->rank; });
    std::set<int> busy;
    std::string out = "calls waiting in the communicator: " + std::to_string(entries.size());
    for (const WaitEntry* e : entries) busy.insert(e->rank);
    for (std::size_t i = 0; i < entries.size(); ++i) {
      if (i == kMaxReportedCalls) {
        out += "\n  ... and " + std::to_string(entries.size() - i) + " more";
        break;
      }
      const WaitEntry* e = entries[i];
      out += "\n  rank " + std::to_string(e->rank) + " waits in " + e->what + ": ";
      if (e->type == WaitType::kCollective) {
        if (e->running) {
          out += "every member arrived, moving data";
          continue;
        }
        const std::vector<int>& members = group_ranks[e->group];
        std::set<int> arrived;
        for (const auto& [id, o] : waits) {
          if (o.type == WaitType::kCollective && o.group == e->group && o.seq == e->seq) arrived.insert(o.rank);
        }
        std::vector<int> missing;
        for (int r : members) {
          if (!arrived.count(r)) missing.push_back(r);
        }
        out += std::to_string(arrived.size()) + " of " + std::to_string(members.size()) + " members arrived";
        if (!missing.empty()) out += "; never arrived: " + plural_ranks(missing);
      } else {
        const WaitType other = e->type == WaitType::kSend ? WaitType::kRecv : WaitType::kSend;
        bool found = false;
        for (const auto& [id, o] : waits) {
          if (o.type == other && o.transfer == e->transfer && o.seq == e->seq) {
            found = true;
          }
        }
        if (found) {
          out += "matched, moving data";
        } else if (e->type == WaitType::kSend) {
          out += "no matching recv posted by rank " + std::to_string(e->transfer.dst);
        } else {
          out += "no matching send posted by rank " + std::to_string(e->transfer.src);
        }
      }
    }
    std::vector<int> idle;
    for (int r = 0; r < num_ranks; ++r) {
      if (!busy.count(r)) idle.push_back(r);
    }
    out += "\nranks in no communicator call: " + (idle.empty() ? std::string("none") : format_ranks(idle));
    return out;
  }

  // ------------------------------------------------------------ abort
  void do_abort(const std::string& why) {
    {
      std::lock_guard lk(abort_mu);
      if (is_aborted.load()) return;
      reason = why;
      is_aborted.store(true);
    }
    // The flag is set before each waiter's mutex is taken, so a waiter either
    // sees it in its predicate or is waiting and gets the notification.
    for (auto& g : groups) {
      { std::lock_guard lk(g->mu); }
      g->cv.notify_all();
    }
    std::vector<Channel*> chans;
    {
      std::lock_guard lk(objects_mu);
      for (auto& [key, c] : channels) chans.push_back(c.get());
    }
    for (Channel* c : chans) {
      { std::lock_guard lk(c->mu); }
      c->cv.notify_all();
    }
  }

  std::string get_reason() const {
    std::lock_guard lk(abort_mu);
    return reason;
  }

  static CommError aborted_error(int rank, const std::string& what, const std::string& why) {
    return CommError(CommError::Kind::kAborted,
                     "communicator aborted while rank " + std::to_string(rank) + " was in " + what + ": " + why);
  }

  [[noreturn]] void throw_aborted(int rank, const std::string& what) const {
    throw aborted_error(rank, what, get_reason());
  }

  // The deadlock report of a call that timed out (may be built while holding a
  // group or channel lock: it takes only wait_mu).
  std::string timeout_report(int rank, const std::string& what) const {
    return "deadlock suspected: rank " + std::to_string(rank) + " waited " + std::to_string(options.timeout.count()) +
           " ms in " + what + "\n" + report();
  }

  // ------------------------------------------------------------ helpers
  void check_rank(int rank, const char* role) const {
    if (rank < 0 || rank >= num_ranks) {
      throw CommError(CommError::Kind::kInvalidArgument, std::string(role) + " rank " + std::to_string(rank) +
                                                             " out of range (communicator has " +
                                                             std::to_string(num_ranks) + " ranks)");
    }
  }

  GroupState& group(int g) {
    if (g < 0 || g >= static_cast<int>(groups.size())) {
      throw CommError(CommError::Kind::kInvalidArgument, "group " + std::to_string(g) +
                                                             " out of range (communicator has " +
                                                             std::to_string(groups.size()) + " groups)");
    }
    return *groups[g];
  }

  std::string group_name(const GroupState& g) const {
    return "group " + std::to_string(g.id) + " [ranks " + format_ranks(g.ranks) + "]";
  }

  Channel& channel(int src, int dst, int ch) {
    std::lock_guard lk(objects_mu);
    auto& c = channels[ir::P2pKey{src, dst, ch}];
    if (!c) c = std::make_unique<Channel>();
    return *c;
  }

  // ------------------------------------------------------------ collectives
  struct Call {
    Desc desc;
    const float* in = nullptr;
    std::size_t in_n = 0;
    float* out = nullptr;
    std::size_t out_n = 0;
  };

  CallStats collective(int rank, int group_id, Call call, std::string_view label);
  CallStats p2p(bool is_send, int src, int dst, int channel_id, Side side);

  void fail_instance(GroupState& g, Instance& inst, CommError::Kind kind, std::string error) {
    inst.failed = true;
    inst.fail_kind = kind;
    inst.error = std::move(error);
    g.cv.notify_all();
  }

  std::string mismatch_message(const GroupState& g, const Instance& inst) const {
    const Desc& a = inst.m[inst.first].desc;
    bool kind = false, count = false, root = false;
    std::vector<int> missing;
    std::string members;
    for (const Member& m : inst.m) {
      if (!m.arrived) continue;
      kind |= m.desc.kind != a.kind;
      count |= m.desc.count != a.count;
      root |= has_root(m.desc.kind) && has_root(a.kind) && m.desc.root != a.root;
      members += "; rank " + std::to_string(m.rank) + ": " + with_label(describe(m.desc), m.label);
    }
    for (std::size_t i = 0; i < inst.m.size(); ++i) {
      if (!inst.m[i].arrived) missing.push_back(g.ranks[i]);
    }
    std::vector<std::string> what;
    if (kind) what.push_back("kind");
    if (count) what.push_back("element count");
    if (root) what.push_back("root");
    std::string differs;
    for (std::size_t i = 0; i < what.size(); ++i) differs += (i == 0 ? "" : i + 1 == what.size() ? " and " : ", ") + what[i];
    std::string s = "collective mismatch on " + group_name(g) + ", collective #" + std::to_string(inst.seq) +
                    ": members disagree on the " + differs + members;
    if (!missing.empty()) s += " (not arrived yet: " + plural_ranks(missing) + ")";
    return s;
  }
};

namespace {

// Chunk c of n near-equal chunks of `count` elements: [begin, begin + len).
std::pair<std::size_t, std::size_t> chunk(std::size_t count, int n, int c) {
  const std::size_t q = count / n, r = count % n;
  const std::size_t uc = static_cast<std::size_t>(c);
  return {uc * q + std::min(uc, r), q + (uc < r ? 1 : 0)};
}

void add_into(float* dst, const float* a, const float* b, std::size_t n) {
  for (std::size_t j = 0; j < n; ++j) dst[j] = a[j] + b[j];
}

// One member's part of a running collective (every member arrived with
// consistent arguments): what it does alone before the steps (`local`,
// touching nothing a peer reads) and what it does at each lockstep step with
// its neighbours. A chain's head starts with its steps done.
struct MemberSchedule {
  int total = 0;  // lockstep steps
  std::function<void()> local;
  std::function<void(int)> step;
};

// The algorithm of collective `d` for member `me` of the instance: rings
// (all-reduce, all-gather, reduce-scatter), direct pairwise (all-to-all) or a
// pipelined chain from / to the root at member index `root` (broadcast,
// reduce; runtime/README.md). The steps add the floats they copy from other
// members' buffers to `received`; the returned functions refer to `inst` and
// `received`, which must outlive them.
MemberSchedule member_schedule(const Desc& d, Instance& inst, int me, int root, std::size_t chunk_elements,
                               std::int64_t& received) {
  const int n = static_cast<int>(inst.m.size());
  const std::size_t count = static_cast<std::size_t>(d.count);
  Member* const mine = &inst.m[static_cast<std::size_t>(me)];
  const Member* const L = &inst.m[static_cast<std::size_t>(mod(me - 1, n))];
  Instance* const all = &inst;
  std::int64_t* const got = &received;
  MemberSchedule out;
  switch (d.kind) {
    case CollectiveKind::kAllReduce:
      // Ring: reduce-scatter (n-1 steps), then all-gather (n-1 steps). At
      // reduce-scatter step s member i adds its left neighbour's chunk i-1-s
      // into its own; it then holds the full sum of chunk i+1. At all-gather
      // step t it copies the left neighbour's chunk i-t.
      out.total = 2 * (n - 1);
      out.step = [mine, L, got, count, n, me](int s) {
        if (s < n - 1) {
          const auto [b, len] = chunk(count, n, mod(me - 1 - s, n));
          add_into(mine->out + b, mine->out + b, L->out + b, len);
          *got += static_cast<std::int64_t>(len);
        } else {
          const auto [b, len] = chunk(count, n, mod(me - (s - (n - 1)), n));
          std::copy_n(L->out + b, len, mine->out + b);
          *got += static_cast<std::int64_t>(len);
        }
      };
      break;
    case CollectiveKind::kAllGather: {
      // Ring: own block locally; at step t copy block i-1-t from the left
      // neighbour (its input at t = 0, its output after).
      const std::size_t m = mine->in_n;
      out.local = [mine, m, me] {
        if (mine->in != mine->out + me * m) std::copy_n(mine->in, m, mine->out + me * m);
      };
      out.total = n - 1;
      out.step = [mine, L, got, m, n, me](int t) {
        const std::size_t blk = static_cast<std::size_t>(mod(me - 1 - t, n));
        const float* src = t == 0 ? L->in : L->out + blk * m;
        std::copy_n(src, m, mine->out + blk * m);
        *got += static_cast<std::int64_t>(m);
      };
      break;
    }
    case CollectiveKind::kReduceScatter: {
      // Ring with partial sums: at step s member i produces the partial of
      // block i-2-s (its input block + the left neighbour's partial from step
      // s-1, or the left neighbour's input block at s = 0) into scratch
      // (double-buffered, the right neighbour reads the previous one), the
      // last step (block i) into the output.
      const std::size_t m = mine->out_n;
      out.local = [mine, m, n] {
        if (n == 1 && mine->out != mine->in) std::copy_n(mine->in, m, mine->out);
      };
      out.total = n - 1;
      out.step = [mine, L, got, m, n, me](int s) {
        const std::size_t blk = static_cast<std::size_t>(mod(me - 2 - s, n));
        const float* other = s == 0 ? L->in + blk * m : L->scratch.data() + ((s - 1) % 2) * m;
        float* dst = s == n - 2 ? mine->out : mine->scratch.data() + (s % 2) * m;
        add_into(dst, mine->in + blk * m, other, m);
        *got += static_cast<std::int64_t>(m);
      };
      break;
    }
    case CollectiveKind::kAllToAll: {
      // Direct pairwise: own block locally, then in round r the block from
      // member i-r (every input is stable until every member is done).
      const std::size_t m = mine->in_n / n;
      out.local = [mine, m, me] { std::copy_n(mine->in + me * m, m, mine->out + me * m); };
      out.total = n > 1 ? 1 : 0;
      out.step = [mine, all, got, m, n, me](int) {
        for (int r = 1; r < n; ++r) {
          const int j = mod(me - r, n);
          std::copy_n(all->m[static_cast<std::size_t>(j)].in + me * m, m, mine->out + j * m);
          *got += static_cast<std::int64_t>(m);
        }
      };
      break;
    }
    case CollectiveKind::kBroadcast: {
      // Pipelined chain along the ring from the root: the member at distance
      // d copies slice s-d+1 from its left neighbour at step s.
      const int dist = mod(me - root, n);
      const std::size_t cs = std::max<std::size_t>(1, chunk_elements);
      const std::size_t slices = std::max<std::size_t>(1, (count + cs - 1) / cs);
      out.total = n > 1 ? static_cast<int>(slices) + n - 2 : 0;
      if (dist == 0) mine->done = out.total;  // the root's data is ready; it never writes
      out.step = [mine, L, got, dist, cs, slices, count](int s) {
        const std::int64_t k = static_cast<std::int64_t>(s) - dist + 1;
        if (k < 0 || k >= static_cast<std::int64_t>(slices)) return;
        const std::size_t b = static_cast<std::size_t>(k) * cs, len = std::min(cs, count - b);
        std::copy_n(L->out + b, len, mine->out + b);
        *got += static_cast<std::int64_t>(len);
      };
      break;
    }
    case CollectiveKind::kReduce: {
      // Pipelined chain ending at the root: position p = distance after the
      // root; p = 0 only provides its input, p >= 1 adds its input to the
      // left neighbour's partial slice s-p+1; the root (p = n-1) writes its output.
      const int p = mod(me - root - 1, n);
      const std::size_t cs = std::max<std::size_t>(1, chunk_elements);
      const std::size_t slices = std::max<std::size_t>(1, (count + cs - 1) / cs);
      out.local = [mine, count, n] {
        if (n == 1 && mine->out != mine->in) std::copy_n(mine->in, count, mine->out);
      };
      out.total = n > 1 ? static_cast<int>(slices) + n - 2 : 0;
      if (p == 0) mine->done = out.total;
      out.step = [mine, L, got, p, cs, slices, count, n](int s) {
        const std::int64_t k = static_cast<std::int64_t>(s) - p + 1;
        if (k < 0 || k >= static_cast<std::int64_t>(slices)) return;
        const std::size_t b = static_cast<std::size_t>(k) * cs, len = std::min(cs, count - b);
        const float* partial = p == 1 ? L->in : L->scratch.data();
        float* dst = p == n - 1 ? mine->out : mine->scratch.data();
        add_into(dst + b, mine->in + b, partial + b, len);
        *got += static_cast<std::int64_t>(len);
      };
      break;
    }
  }
  return out;
}

}  // namespace

CallStats Communicator::Impl::collective(int rank, int group_id, Call call, std::string_view label) {
  check_rank(rank, "calling");
  GroupState& g = group(group_id);
  const auto pos = std::lower_bound(g.ranks.begin(), g.ranks.end(), rank);
  if (pos == g.ranks.end() || *pos != rank) {
    throw CommError(CommError::Kind::kInvalidArgument,
                    "rank " + std::to_string(rank) + " called " + std::string(to_string(call.desc.kind)) + " on " +
                        group_name(g) + ", which it is not a member of");
  }
  const int me = static_cast<int>(pos - g.ranks.begin());
  const int n = static_cast<int>(g.ranks.size());
  const Clock::time_point deadline = Clock::now() + options.timeout;

  std::vector<float> scratch;
  if (n > 1 && call.desc.invalid.empty()) {
    if (call.desc.kind == CollectiveKind::kReduceScatter) scratch.resize(2 * call.out_n);
    if (call.desc.kind == CollectiveKind::kReduce && call.desc.root != rank) scratch.resize(call.in_n);
  }

  std::unique_lock lk(g.mu);
  const std::int64_t seq = g.next_seq[me]++;
  const std::string what = with_label(describe(call.desc) + " on " + group_name(g) + " (collective #" +
                                          std::to_string(seq) + ")",
                                      label);
  if (is_aborted.load()) throw_aborted(rank, what);
  auto& slot = g.instances[seq];
  if (!slot) {
    slot = std::make_shared<Instance>();
    slot->seq = seq;
    slot->m.resize(n);
  }
  std::shared_ptr<Instance> inst = slot;
  Registration reg(*this, WaitEntry{.rank = rank, .type = WaitType::kCollective, .group = group_id, .seq = seq,
                                    .transfer = {},
                                    .what = what});
  // Leaves the instance on every exit, with the group lock held.
  struct Leave {
    std::unique_lock<std::mutex>& lk;
    GroupState& g;
    Instance& inst;
    ~Leave() {
      if (!lk.owns_lock()) lk.lock();
      if (++inst.left == static_cast<int>(inst.m.size())) g.instances.erase(inst.seq);
    }
  } leave{lk, g, *inst};

  Member& mine = inst->m[me];
  mine.arrived = true;
  mine.rank = rank;
  mine.desc = call.desc;
  mine.label = std::string(label);
  mine.in = call.in;
  mine.in_n = call.in_n;
  mine.out = call.out;
  mine.out_n = call.out_n;
  mine.scratch = std::move(scratch);
  ++inst->arrived;
  if (inst->first < 0) inst->first = me;

  if (!inst->failed) {
    const Desc& a = inst->m[inst->first].desc;
    if (!call.desc.invalid.empty()) {
      fail_instance(g, *inst, CommError::Kind::kMismatch,
                    "invalid " + std::string(to_string(call.desc.kind)) + " on " + group_name(g) + ", collective #" +
                        std::to_string(seq) + ": rank " + std::to_string(rank) + ": " + call.desc.invalid);
    } else if (a.kind != call.desc.kind || a.count != call.desc.count ||
               (has_root(a.kind) && a.root != call.desc.root)) {
      fail_instance(g, *inst, CommError::Kind::kMismatch, mismatch_message(g, *inst));
    } else if (inst->arrived == n) {
      inst->all_arrived = true;
      inst->all_arrived_at = std::chrono::steady_clock::now();
      g.cv.notify_all();
    }
  }
  if (!inst->all_arrived) {
    g.cv.wait_until(lk, deadline, [&] { return inst->all_arrived || inst->failed || is_aborted.load(); });
  }
  if (!inst->all_arrived) {
    if (inst->failed) {
      if (inst->fail_kind == CommError::Kind::kAborted) throw aborted_error(rank, what, inst->error);
      throw CommError(inst->fail_kind, inst->error);
    }
    // Give up, failing the instance in the same critical section, so that no
    // later arrival can start moving data with this member gone. On a timeout
    // the members still to come get the deadlock report.
    const bool was_aborted = is_aborted.load();
    const std::string why = was_aborted ? get_reason() : timeout_report(rank, what);
    fail_instance(g, *inst, CommError::Kind::kAborted, why);
    if (was_aborted) throw aborted_error(rank, what, why);
    lk.unlock();
    do_abort(why);
    throw CommError(CommError::Kind::kTimeout, why);
  }

  // ---------------- running: every member arrived with consistent arguments.
  // From here on no wait can block forever (every member is in this loop),
  // and peers read this member's buffers, so aborts and timeouts are ignored
  // until the collective completes.
  reg.set_running();
  const Desc d = call.desc;
  const int left = mod(me - 1, n), right = mod(me + 1, n);
  std::int64_t received = 0;  // floats copied from other members' buffers

  const int root = has_root(d.kind)
                       ? static_cast<int>(std::lower_bound(g.ranks.begin(), g.ranks.end(), d.root) - g.ranks.begin())
                       : -1;
  const MemberSchedule schedule = member_schedule(d, *inst, me, root, options.pipeline_chunk_elements, received);
  const int total = schedule.total;

  if (mine.done > 0) g.cv.notify_all();  // a chain's head: its data was ready on arrival
  if (schedule.local) {
    lk.unlock();
    schedule.local();
    lk.lock();
  }

  // Lockstep with the neighbours: step s starts when both have completed
  // s steps. The left one has then produced what step s reads; the right one
  // has read everything it needed of this member before step s, and at step s
  // reads a different chunk than this member writes (README.md).
  for (int s = 0; s < total; ++s) {
    if (mine.done > s) continue;
    g.cv.wait(lk, [&] { return inst->m[left].done >= s && inst->m[right].done >= s; });
    lk.unlock();
    schedule.step(s);
    lk.lock();
    mine.done = s + 1;
    g.cv.notify_all();
  }
  // Nobody may return while a peer can still read its buffers.
  g.cv.wait(lk, [&] {
    return std::all_of(inst->m.begin(), inst->m.end(), [&](const Member& m) { return m.done >= total; });
  });
  const std::int64_t bytes = received * static_cast<std::int64_t>(sizeof(float));
  bytes_moved.fetch_add(bytes);
  return CallStats{.size_bytes = d.count * static_cast<std::int64_t>(sizeof(float)),
                   .bytes_received = bytes,
                   .started = inst->all_arrived_at};
}

// ------------------------------------------------------------------ Communicator

Communicator::Communicator(int num_ranks, std::vector<std::vector<int>> groups, CommunicatorOptions options)
    : impl_(std::make_unique<Impl>()) {
  if (num_ranks <= 0) {
    throw CommError(CommError::Kind::kInvalidArgument,
                    "communicator needs at least one rank (got " + std::to_string(num_ranks) + ")");
  }
  if (options.timeout.count() <= 0) {
    throw CommError(CommError::Kind::kInvalidArgument, "communicator timeout must be positive (got " +
                                                           std::to_string(options.timeout.count()) + " ms)");
  }
  impl_->num_ranks = num_ranks;
  impl_->options = options;
  for (std::size_t gi = 0; gi < groups.size(); ++gi) {
    const std::vector<int>& r = groups[gi];
    const std::string name = "group " + std::to_string(gi);
    if (r.empty()) throw CommError(CommError::Kind::kInvalidArgument, name + " has no ranks");
    for (std::size_t i = 0; i < r.size(); ++i) {
      if (r[i] < 0 || r[i] >= num_ranks) {
        throw CommError(CommError::Kind::kInvalidArgument, name + ": rank " + std::to_string(r[i]) +
                                                               " out of range (communicator has " +
                                                               std::to_string(num_ranks) + " ranks)");
      }
      if (i > 0 && r[i] <= r[i - 1]) {
        throw CommError(CommError::Kind::kInvalidArgument, name + ": ranks must be strictly ascending (" +
                                                               std::to_string(r[i - 1]) + " then " +
                                                               std::to_string(r[i]) + ")");
      }
    }
    auto g = std::make_unique<GroupState>();
    g->id = static_cast<int>(gi);
    g->ranks = r;
    g->next_seq.assign(r.size(), 0);
    impl_->groups.push_back(std::move(g));
  }
  impl_->group_ranks = std::move(groups);
}

Communicator::~Communicator() = default;

int Communicator::num_ranks() const { return impl_->num_ranks; }
int Communicator::num_groups() const { return static_cast<int>(impl_->groups.size()); }
const std::vector<int>& Communicator::group_ranks(int group) const { return impl_->group(group).ranks; }
const CommunicatorOptions& Communicator::options() const { return impl_->options; }

namespace {
int group_size_or_zero(const std::vector<std::vector<int>>& groups, int g) {
  return g >= 0 && g < static_cast<int>(groups.size()) ? static_cast<int>(groups[g].size()) : 0;
}
bool is_member(const std::vector<std::vector<int>>& groups, int g, int rank) {
  if (g < 0 || g >= static_cast<int>(groups.size())) return false;
  return std::binary_search(groups[g].begin(), groups[g].end(), rank);
}
}  // namespace

CallStats Communicator::all_reduce(int rank, int group, std::span<float> buffer, std::string_view label) {
  Impl::Call c;
  c.desc = make_desc(CollectiveKind::kAllReduce, static_cast<std::int64_t>(buffer.size()));
  c.in = buffer.data();
  c.in_n = buffer.size();
  c.out = buffer.data();
  c.out_n = buffer.size();
  return impl_->collective(rank, group, std::move(c), label);
}

CallStats Communicator::all_gather(int rank, int group, std::span<const float> input, std::span<float> output,
                                   std::string_view label) {
  const std::size_t n = static_cast<std::size_t>(group_size_or_zero(impl_->group_ranks, group));
  Impl::Call c;
  c.desc = make_desc(CollectiveKind::kAllGather, static_cast<std::int64_t>(output.size()));
  if (n > 0 && output.size() != n * input.size()) {
    c.desc.invalid = "output has " + std::to_string(output.size()) + " floats, expected group size " +
                     std::to_string(n) + " x input " + std::to_string(input.size()) + " = " +
                     std::to_string(n * input.size());
  }
  c.in = input.data();
  c.in_n = input.size();
  c.out = output.data();
  c.out_n = output.size();
  return impl_->collective(rank, group, std::move(c), label);
}

CallStats Communicator::reduce_scatter(int rank, int group, std::span<const float> input, std::span<float> output,
                                       std::string_view label) {
  const std::size_t n = static_cast<std::size_t>(group_size_or_zero(impl_->group_ranks, group));
  Impl::Call c;
  c.desc = make_desc(CollectiveKind::kReduceScatter, static_cast<std::int64_t>(input.size()));
  if (n > 0 && input.size() != n * output.size()) {
    c.desc.invalid = "input has " + std::to_string(input.size()) + " floats, expected group size " +
                     std::to_string(n) + " x output " + std::to_string(output.size()) + " = " +
                     std::to_string(n * output.size());
  }
  c.in = input.data();
  c.in_n = input.size();
  c.out = output.data();
  c.out_n = output.size();
  return impl_->collective(rank, group, std::move(c), label);
}

CallStats Communicator::all_to_all(int rank, int group, std::span<const float> input, std::span<float> output,
                                   std::string_view label) {
  const std::size_t n = static_cast<std::size_t>(group_size_or_zero(impl_->group_ranks, group));
  Impl::Call c;
  c.desc = make_desc(CollectiveKind::kAllToAll, static_cast<std::int64_t>(input.size()));
  if (n > 0 && input.size() % n != 0) {
    c.desc.invalid = "input of " + std::to_string(input.size()) + " floats does not split into group size " +
                     std::to_string(n) + " equal blocks";
  } else if (output.size() != input.size()) {
    c.desc.invalid = "output has " + std::to_string(output.size()) + " floats, input " +
                     std::to_string(input.size()) + " (must be equal)";
  }
  c.in = input.data();
  c.in_n = input.size();
  c.out = output.data();
  c.out_n = output.size();
  return impl_->collective(rank, group, std::move(c), label);
}

CallStats Communicator::broadcast(int rank, int group, int root, std::span<float> buffer, std::string_view label) {
  Impl::Call c;
  c.desc = make_desc(CollectiveKind::kBroadcast, static_cast<std::int64_t>(buffer.size()), root);
  if (group_size_or_zero(impl_->group_ranks, group) > 0 && !is_member(impl_->group_ranks, group, root)) {
    c.desc.invalid = "root rank " + std::to_string(root) + " is not a member of the group";
  }
  c.in = buffer.data();
  c.in_n = buffer.size();
  c.out = buffer.data();
  c.out_n = buffer.size();
  return impl_->collective(rank, group, std::move(c), label);
}

CallStats Communicator::reduce(int rank, int group, int root, std::span<const float> input, std::span<float> output,
                               std::string_view label) {
  Impl::Call c;
  c.desc = make_desc(CollectiveKind::kReduce, static_cast<std::int64_t>(input.size()), root);
  if (group_size_or_zero(impl_->group_ranks, group) > 0 && !is_member(impl_->group_ranks, group, root)) {
    c.desc.invalid = "root rank " + std::to_string(root) + " is not a member of the group";
  } else if (rank == root && output.size() != input.size()) {
    c.desc.invalid = "root output has " + std::to_string(output.size()) + " floats, input " +
                     std::to_string(input.size()) + " (must be equal)";
  }
  c.in = input.data();
  c.in_n = input.size();
  c.out = rank == root ? output.data() : nullptr;
  c.out_n = rank == root ? output.size() : 0;
  return impl_->collective(rank, group, std::move(c), label);
}

// ------------------------------------------------------------------ point-to-point

namespace {

std::string describe_side(bool is_send, const Side& s, int src, int dst, int channel) {
  std::string out = is_send ? "send to rank " + std::to_string(dst) : "recv from rank " + std::to_string(src);
  out += " (channel " + std::to_string(channel) + ", tag " + std::to_string(s.tag) + ", " + std::to_string(s.n) +
         " floats)";
  return with_label(out, s.label);
}

}  // namespace

CallStats Communicator::Impl::p2p(bool is_send, int src, int dst, int channel_id, Side side) {
  check_rank(src, "source");
  check_rank(dst, "destination");
  const int rank = is_send ? src : dst;
  if (channel_id < 0) {
    throw CommError(CommError::Kind::kInvalidArgument,
                    "rank " + std::to_string(rank) + ": channel " + std::to_string(channel_id) + " is negative");
  }
  Channel& ch = channel(src, dst, channel_id);
  const Clock::time_point deadline = Clock::now() + options.timeout;
  const std::int64_t size_bytes = static_cast<std::int64_t>(side.n * sizeof(float));

  std::unique_lock lk(ch.mu);
  const std::int64_t seq = is_send ? ch.next_send++ : ch.next_recv++;
  const std::string what = describe_side(is_send, side, src, dst, channel_id) + " (transfer #" + std::to_string(seq) + ")";
  if (is_aborted.load()) throw_aborted(rank, what);
  auto& slot = ch.pending[seq];
  if (!slot) {
    slot = std::make_shared<Transfer>();
    slot->seq = seq;
  }
  std::shared_ptr<Transfer> t = slot;
  Registration reg(*this, WaitEntry{.rank = rank,
                                    .type = is_send ? WaitType::kSend : WaitType::kRecv,
                                    .seq = seq,
                                    .transfer = {src, dst, channel_id},
                                    .what = what});
  if (is_send) {
    t->send = std::move(side);
    t->has_send = true;
  } else {
    t->recv = std::move(side);
    t->has_recv = true;
  }
  if (t->failed) {  // the other side arrived first and gave up
    ch.pending.erase(seq);
    throw aborted_error(rank, what, t->error);
  }
  if (t->has_send && t->has_recv) {
    // Second to arrive: check the pair, then copy while the other side waits.
    ch.pending.erase(seq);
    const Side& s = t->send;
    const Side& r = t->recv;
    if (s.tag != r.tag || s.n != r.n) {
      std::string differs;
      if (s.tag != r.tag) differs = "tags differ (" + std::to_string(s.tag) + " vs " + std::to_string(r.tag) + ")";
      if (s.n != r.n) {
        differs += std::string(differs.empty() ? "" : " and ") + "sizes differ (" + std::to_string(s.n) + " vs " +
                   std::to_string(r.n) + " floats)";
      }
      t->failed = true;
      t->fail_kind = CommError::Kind::kMismatch;
      t->error = "p2p mismatch " + ir::describe(ir::P2pKey{src, dst, channel_id}) + ", transfer #" +
                 std::to_string(seq) + ": rank " +
                 std::to_string(src) + " " + describe_side(true, s, src, dst, channel_id) + " matched rank " +
                 std::to_string(dst) + " " + describe_side(false, r, src, dst, channel_id) + ": " + differs;
      ch.cv.notify_all();
      throw CommError(CommError::Kind::kMismatch, t->error);
    }
    t->matched = true;
    t->matched_at = std::chrono::steady_clock::now();
    lk.unlock();
    std::copy_n(s.src, s.n, r.dst);
    lk.lock();
    t->done = true;
    ch.cv.notify_all();
    bytes_moved.fetch_add(size_bytes);
    return CallStats{.size_bytes = size_bytes, .bytes_received = is_send ? 0 : size_bytes, .started = t->matched_at};
  }
  ch.cv.wait_until(lk, deadline, [&] { return t->matched || t->failed || is_aborted.load(); });
  if (t->matched) {
    // The other side is copying from/into this side's buffer: wait for it
    // even if the communicator is aborted meanwhile.
    ch.cv.wait(lk, [&] { return t->done; });
    return CallStats{.size_bytes = size_bytes, .bytes_received = is_send ? 0 : size_bytes, .started = t->matched_at};
  }
  if (t->failed) throw CommError(t->fail_kind, t->error);  // a mismatch found by the other side
  // Give up; the pending record stays, so the other side fails when it comes.
  const bool was_aborted = is_aborted.load();
  const std::string why = was_aborted ? get_reason() : timeout_report(rank, what);
  t->failed = true;
  t->fail_kind = CommError::Kind::kAborted;
  t->error = why;
  if (was_aborted) throw aborted_error(rank, what, why);
  lk.unlock();
  do_abort(why);
  throw CommError(CommError::Kind::kTimeout, why);
}

CallStats Communicator::send(int src, int dst, int channel, std::int64_t tag, std::span<const float> data,
                             std::string_view label) {
  Side side{.rank = src, .tag = tag, .n = data.size(), .src = data.data(), .label = std::string(label)};
  return impl_->p2p(true, src, dst, channel, std::move(side));
}

CallStats Communicator::recv(int dst, int src, int channel, std::int64_t tag, std::span<float> out,
                             std::string_view label) {
  Side side{.rank = dst, .tag = tag, .n = out.size(), .dst = out.data(), .label = std::string(label)};
  return impl_->p2p(false, src, dst, channel, std::move(side));
}

// ------------------------------------------------------------------ abort and reports

void Communicator::abort(const std::string& reason) { impl_->do_abort(reason); }
bool Communicator::aborted() const { return impl_->is_aborted.load(); }
std::string Communicator::abort_reason() const { return impl_->get_reason(); }
std::string Communicator::waiting_report() const { return impl_->report(); }
int Communicator::waiting_calls() const {
  std::lock_guard lk(impl_->wait_mu);
  return static_cast<int>(impl_->waits.size());
}
std::int64_t Communicator::total_bytes_moved() const { return impl_->bytes_moved.load(); }

}  // namespace lacuna::runtime
