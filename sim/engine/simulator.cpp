// The event loop. Ops with a duration (compute, collectives, transfers) end by
// a queued event; records and waits take no time and run inline when their
// stream reaches them. A stream is advanced until it blocks or has an op in
// flight; streams released at the current time go through `worklist` so the
// order of processing is a deterministic function of the event order. An op
// whose host has not issued it yet (Op.host_ns / host_sync, docs/engine.md#host)
// blocks its stream until a kHostIssued event; ops without host costs never
// look at the host clock. With several iterations a stream that reaches its
// end wraps to its first op in the next iteration (docs/engine.md#iterations).
#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <span>
#include <tuple>

#include "sim/cost/group_shape.h"
#include "sim/engine/simulator_impl.h"
#include "sim/ir/validate.h"
#include "sim/scenario/nvlink_domain.h"

namespace lacuna::engine {
namespace {

constexpr int64_t kMaxTimeNs = std::numeric_limits<int64_t>::max();

// CommunicationModel tokens: the completion event's kind and index.
uint64_t token_of(EngineEvent::Kind kind, uint32_t index) { return (uint64_t{kind} << 32) | index; }
EngineEvent event_of(uint64_t token) {
  return EngineEvent{static_cast<EngineEvent::Kind>(token >> 32), static_cast<uint32_t>(token)};
}

}  // namespace

Simulator::Impl::Impl(const ir::Program& p, const cost::CostModel& cost, SimulationOptions o)
    : program(p), options(o), comm_model(o.communication), perturbation(o.perturbation),
      slowdown(o.compute_slowdown_under_comm), comm_costs(cost) {
  ir::validate_program(p);
  if (!(slowdown >= 0) || !std::isfinite(slowdown)) {
    throw Error("compute_slowdown_under_comm must be a non-negative number, got " + std::to_string(slowdown));
  }
  if (o.iterations < 1) throw Error("iterations must be >= 1, got " + std::to_string(o.iterations));
  last_iteration = static_cast<uint32_t>(o.iterations - 1);
  if (o.compute_slots < 0) throw Error("compute_slots must be >= 0 (0: no limit), got " + std::to_string(o.compute_slots));
  if (o.compute_slots > 0 && o.fold) {
    throw Error(SourceLocation{}, "compute slots model one host shared by every rank; a folded run simulates only some",
                "simulate every rank (no ‹fold›) with ‹compute-slots›");
  }
  simulated = plan_simulated_ranks(p, o.fold);
  const size_t num_sim = simulated.ranks.size();
  std::vector<int32_t> sim_index(static_cast<size_t>(p.ranks_size()), -1);
  for (size_t i = 0; i < num_sim; ++i) sim_index[simulated.ranks[i]] = static_cast<int32_t>(i);

  groups.resize(static_cast<size_t>(p.groups_size()));
  for (int g = 0; g < p.groups_size(); ++g) {
    const auto& members = p.groups(g).ranks();
    const cost::GroupShape shape =
        cost::shape_of_ranks(p, std::span<const int32_t>(members.data(), static_cast<size_t>(members.size())));
    auto it = std::find(shapes.begin(), shapes.end(), shape);
    groups[g].shape_id = static_cast<int32_t>(it - shapes.begin());
    if (it == shapes.end()) shapes.push_back(shape);
  }

  classes.resize(static_cast<size_t>(p.classes_size()));
  std::vector<bool> flattened(classes.size(), false);
  const int num_slots = p.group_slots_size();
  const ir::BoundProgram bound(p);
  std::map<ir::P2pKey, uint32_t> mailbox_of;
  ranks.resize(num_sim);
  slot_group.assign(num_sim * static_cast<size_t>(num_slots), -1);
  slot_counter.assign(num_sim * static_cast<size_t>(num_slots), -1);
  uint32_t stream_base = 0;
  for (size_t i = 0; i < num_sim; ++i) {
    const int32_t r = simulated.ranks[i];
    const ir::RankBinding& b = p.ranks(r);
    const int32_t c = b.class_id();
    if (!flattened[c]) {
      classes[c] = flatten_class(p.classes(c), c, cost);
      flattened[c] = true;
    }
    const FlatClass& fc = classes[c];
    SimRank& sr = ranks[i];
    sr.rank = r;
    sr.cls = c;
    sr.scaled = b.has_compute_time_scale() && b.compute_time_scale() != 1.0;
    sr.scale = b.has_compute_time_scale() ? b.compute_time_scale() : 1.0;
    sr.node = static_cast<int32_t>(b.node() / scenario::nodes_per_nvlink_domain(p.cluster()));
    sr.stream_base = stream_base;
    sr.num_streams = static_cast<uint32_t>(fc.streams.size());
    stream_base += sr.num_streams;
    sr.event_base = static_cast<uint32_t>(num_event_counters);
    num_event_counters += static_cast<size_t>(fc.num_events);
    sr.slot_base = static_cast<uint32_t>(i * static_cast<size_t>(num_slots));
    for (int s = 0; s < num_slots; ++s) {
      const int32_t g = bound.group(r, s);
      if (g < 0) continue;
      slot_group[sr.slot_base + s] = g;
      // Two slots naming one group (dp and dp_cp when cp = 1) share a counter:
      // matching is per group, not per slot.
      int32_t counter = -1;
      for (int prev = 0; prev < s; ++prev) {
        if (slot_group[sr.slot_base + prev] == g) counter = slot_counter[sr.slot_base + prev];
      }
      if (counter < 0) counter = static_cast<int32_t>(num_issue_counters++);
      slot_counter[sr.slot_base + s] = counter;
    }
    sr.endpoint_base = static_cast<uint32_t>(endpoint_mailbox.size());
    for (const Endpoint& e : fc.endpoints) {
      const ir::P2pKey key = bound.p2p_key(r, e.is_send, e.peer_slot, e.channel);
      auto [it, inserted] = mailbox_of.try_emplace(key, static_cast<uint32_t>(mailboxes.size()));
      if (inserted) {
        Mailbox m;
        m.key = key;
        mailboxes.push_back(std::move(m));
      }
      endpoint_mailbox.push_back(it->second);
    }
  }
  for (int g = 0; g < p.groups_size(); ++g) {
    for (int32_t r : p.groups(g).ranks()) {
      const int32_t i = sim_index[r];
      if (i < 0) continue;
      int32_t counter = -1;
      for (int s = 0; s < num_slots; ++s) {
        if (slot_group[ranks[i].slot_base + s] == g) counter = slot_counter[ranks[i].slot_base + s];
      }
      groups[g].members.emplace_back(static_cast<uint32_t>(i), counter);
    }
    groups[g].expected = static_cast<int32_t>(groups[g].members.size());
  }
  for (size_t c = 0; c < classes.size(); ++c) {
    if (flattened[c]) classes[c].collective_ns.assign(static_cast<size_t>(classes[c].num_collectives) * shapes.size(), -1);
  }
  if (perturbation != nullptr) apply_perturbation(p, flattened);
  comm_wakeups = comm_model != nullptr && comm_model->uses_wakeups();
}

void Simulator::Impl::reset() {
  streams.clear();
  for (size_t i = 0; i < ranks.size(); ++i) {
    const FlatClass& fc = classes[ranks[i].cls];
    for (size_t s = 0; s < fc.streams.size(); ++s) {
      StreamState st;
      st.rank = static_cast<uint32_t>(i);
      st.local = static_cast<int32_t>(s);
      st.begin = st.cursor = fc.streams[s].begin;
      st.end = fc.streams[s].end;
      streams.push_back(st);
    }
  }
  host_clock.assign(streams.size(), TimeNs::zero());
  host_reached.assign(streams.size(), TimeNs::zero());
  event_counts.assign(num_event_counters, 0);
  wait_mask.assign(ranks.size(), 0);
  issue_counts.assign(num_issue_counters, 0);
  group_runtime.assign(groups.size(), GroupRuntime{});
  instances.clear();
  free_instances.clear();
  transfers.clear();
  free_transfers.clear();
  for (Mailbox& m : mailboxes) {
    m.posts.clear();
    m.head = 0;
  }
  worklist.clear();
  worklist.reserve(streams.size());
  free_slots = options.compute_slots;
  slot_waiters.assign(options.compute_slots > 0 ? streams.size() : 0, 0);
  slot_head = 0;
  slot_count = 0;
  // Pending events never exceed one per stream plus one per collective/transfer.
  queue = RadixEventQueue<EngineEvent>(streams.size() + 16);
  now = TimeNs::zero();
  iteration_ends.assign(last_iteration + 1, TimeNs::zero());
  events = 0;
  ops_done = 0;
  for (SimRank& r : ranks) r.comm_in_flight = 0;
  live_streams = streams.size();
  wakeup_at = TimeNs::max();
  wakeup_event = EventId{};
  comm_settle_pending = false;
  if (comm_model != nullptr) comm_model->reset();
  if (comm_wakeups) sync_comm_wakeup();
}

SimulationResult Simulator::Impl::run() {
  reset();
  if (!observers.empty()) {
    RunInfo info;
    info.program = &program;
    info.simulated_ranks = simulated.ranks;
    info.represents = simulated.represents;
    info.compute_slots = options.compute_slots;
    info.iterations = options.iterations;
    for (Observer* o : observers) o->on_run_begin(info);
  }
  for (uint32_t s = 0; s < streams.size(); ++s) worklist.push_back(s);
  drain_worklist();
  uint64_t ops_total = 0;
  if (options.progress != nullptr) {
    for (const StreamState& st : streams) ops_total += st.end - st.begin;
    ops_total *= static_cast<uint64_t>(std::max(1, options.iterations));
  }
  ScheduledEvent<EngineEvent> ev;
  while (queue.pop(ev)) {
    now = ev.time;
    if (ev.payload.kind == EngineEvent::kCommSettle) {
      // Bookkeeping, not a simulated event: not counted in `events`, so the
      // count is the same whatever the model batches.
      comm_settle_pending = false;
      apply_comm_updates();
      continue;
    }
    ++events;
    if (options.progress != nullptr && events % kProgressEveryEvents == 0) {
      options.progress->on_progress(events, ops_done, ops_total, now);
    }
    switch (ev.payload.kind) {
      case EngineEvent::kOpDone:
        finish_op(ev.payload.index, now, nullptr);
        if (streams[ev.payload.index].holds_slot) release_slot(ev.payload.index);
        advance(ev.payload.index);
        break;
      case EngineEvent::kCollectiveDone:
        complete_collective(ev.payload.index);
        break;
      case EngineEvent::kTransferDone:
        complete_transfer(ev.payload.index);
        break;
      case EngineEvent::kHostIssued:
        advance(ev.payload.index);  // issue_on_host() resumes the op
        break;
      case EngineEvent::kCommWakeup:
        comm_wakeup();
        break;
      case EngineEvent::kCommSettle:
        break;  // handled above
    }
    if (!worklist.empty()) drain_worklist();
  }
  for (const StreamState& st : streams) {
    if (st.status != StreamStatus::kDone) throw_deadlock();
  }
  // Each stream ends iteration k + 1 after iteration k, so the ends do not
  // decrease and the last is the run's end.
  const TimeNs end = iteration_ends.back();
  for (Observer* o : observers) o->on_run_end(end);
  SimulationResult result;
  result.end_time = end;
  result.iteration_ends = iteration_ends;
  result.events = events;
  result.simulated_ranks = simulated.ranks;
  result.ops = ops_done;
  return result;
}

void Simulator::Impl::drain_worklist() {
  // advance() may append released streams while we iterate.
  for (size_t i = 0; i < worklist.size(); ++i) advance(worklist[i]);
  worklist.clear();
}

TimeNs Simulator::Impl::scaled_compute(const SimRank& rank, int64_t base_ns) const {
  if (!rank.scaled) return TimeNs(base_ns);
  const double v = static_cast<double>(base_ns) * rank.scale;
  if (v > 4e18) throw Error("rank " + std::to_string(rank.rank) + ": scaled compute duration overflows");
  return TimeNs(static_cast<int64_t>(std::llround(v)));
}

EventId Simulator::Impl::schedule_completion(TimeNs duration, EngineEvent event) {
  if (duration.count() > kMaxTimeNs - now.count()) {
    throw Error("simulated time exceeds the int64 nanosecond range (an op of " + std::to_string(duration.count()) +
                " ns at t = " + std::to_string(now.count()) + " ns)");
  }
  return queue.schedule(now + duration, event);
}

void Simulator::Impl::advance(uint32_t sid) {
  StreamState& st = streams[sid];
  const SimRank& rk = ranks[st.rank];
  const FlatClass& fc = classes[rk.cls];
  for (;;) {
    if (st.cursor == st.end) {
      if (st.iteration == last_iteration) break;
      ++st.iteration;  // the next iteration begins where this one ended
      st.cursor = st.begin;
      continue;
    }
    const FlatOp& op = fc.ops[st.cursor];
    st.ready = now;
    st.start = now;
    if (op.has_host && !issue_on_host(sid, op)) return;
    switch (op.kind) {
      case OpKind::kCompute: {
        if (options.compute_slots > 0 && fc.ir[st.cursor]->compute().fixed_duration_ns() <= 0) {
          if (free_slots == 0) {
            st.status = StreamStatus::kBlockedSlot;
            slot_waiters[(slot_head + slot_count++) % slot_waiters.size()] = sid;
            return;
          }
          --free_slots;
          st.holds_slot = true;
        }
        start_compute(sid);
        return;
      }
      case OpKind::kRecord: {
        const int64_t count = ++event_counts[rk.event_base + op.slot];
        WaitCause cause;
        cause.valid = true;
        cause.stream = st.local;
        cause.op = st.prev_op;
        cause.ready = st.prev_op >= 0 ? st.prev_ready : now;
        cause.start = st.prev_op >= 0 ? st.prev_start : now;
        cause.end = st.prev_op >= 0 ? st.prev_end : now;
        finish_op(sid, now, nullptr);
        wake_waiters(st.rank, op.slot, count, cause);
        continue;
      }
      case OpKind::kWait:
        if (event_counts[rk.event_base + op.slot] >= wait_target(st, op)) {
          const WaitCause already_recorded;
          finish_op(sid, now, &already_recorded);
          continue;
        }
        st.status = StreamStatus::kBlockedWait;
        if (st.local < 64) wait_mask[st.rank] |= uint64_t{1} << st.local;
        return;
      case OpKind::kCollective:
        st.status = StreamStatus::kBlockedComm;
        arrive_collective(sid, op);
        return;
      case OpKind::kSend:
      case OpKind::kRecv:
        st.status = StreamStatus::kBlockedComm;
        post_p2p(sid, op);
        return;
    }
  }
  st.status = StreamStatus::kDone;
  --live_streams;
}

bool Simulator::Impl::issue_on_host(uint32_t sid, const FlatOp& op) {
  StreamState& st = streams[sid];
  if (st.status == StreamStatus::kBlockedHost) {
    // Its kHostIssued event: the host issued the op now; it was reached earlier.
    st.status = StreamStatus::kIdle;
    st.ready = host_reached[sid];
    return true;
  }
  TimeNs& host = host_clock[sid];
  // host_sync: the host first waits for the stream to finish every earlier
  // op, i.e. until now, when the stream reached this one.
  const TimeNs from = op.host_sync ? std::max(host, now) : host;
  if (op.host_ns > kMaxTimeNs - from.count()) {
    throw Error("simulated time exceeds the int64 nanosecond range (" + where(sid) + ": host_ns " +
                std::to_string(op.host_ns) + " at host time " + std::to_string(from.count()) + " ns)");
  }
  host = from + TimeNs(op.host_ns);
  if ((op.perturb & kPerturbHost) != 0) delay_on_host(sid, host);
  if (host <= now) return true;  // the host ran ahead: issued before the stream got here
  st.status = StreamStatus::kBlockedHost;
  host_reached[sid] = now;
  queue.schedule(host, EngineEvent{EngineEvent::kHostIssued, sid});
  return false;
}

void Simulator::Impl::start_compute(uint32_t sid) {
  StreamState& st = streams[sid];
  const SimRank& rk = ranks[st.rank];
  const FlatOp& op = classes[rk.cls].ops[st.cursor];
  st.status = StreamStatus::kRunning;
  st.start = now;
  const TimeNs work = (op.perturb & kPerturbCompute) != 0 ? perturbed_compute(st, rk, op) : scaled_compute(rk, op.value);
  if (slowdown == 0) {
    schedule_completion(work, EngineEvent{EngineEvent::kOpDone, sid});
    return;
  }
  st.work_left_ns = static_cast<double>(work.count());
  st.work_since = now;
  st.slowed = rk.comm_in_flight > 0;
  st.compute_done =
      schedule_completion(interfered_duration(st.work_left_ns, st.slowed), EngineEvent{EngineEvent::kOpDone, sid});
}

void Simulator::Impl::release_slot(uint32_t sid) {
  streams[sid].holds_slot = false;
  if (slot_count == 0) {
    ++free_slots;
    return;
  }
  // The slot passes straight to the longest waiter, which starts now.
  const uint32_t next = slot_waiters[slot_head];
  slot_head = (slot_head + 1) % slot_waiters.size();
  --slot_count;
  streams[next].holds_slot = true;
  start_compute(next);
}

void Simulator::Impl::wake_waiters(uint32_t rank, int32_t event, int64_t count, const WaitCause& cause) {
  const SimRank& rk = ranks[rank];
  const FlatClass& fc = classes[rk.cls];
  auto try_wake = [&](uint32_t s) {
    StreamState& w = streams[s];
    const FlatOp& op = fc.ops[w.cursor];
    if (op.slot != event || wait_target(w, op) > count) return false;
    finish_op(s, now, &cause);
    worklist.push_back(s);
    return true;
  };
  for (uint64_t m = wait_mask[rank]; m != 0; m &= m - 1) {
    const int local = __builtin_ctzll(m);
    if (try_wake(rk.stream_base + static_cast<uint32_t>(local))) wait_mask[rank] &= ~(uint64_t{1} << local);
  }
  for (uint32_t s = rk.stream_base + 64; s < rk.stream_base + rk.num_streams; ++s) {
    if (streams[s].status == StreamStatus::kBlockedWait) try_wake(s);
  }
}

OpSpan Simulator::Impl::span_of(const StreamState& st, TimeNs end) const {
  OpSpan span;
  span.rank = ranks[st.rank].rank;
  span.stream = st.local;
  span.op = static_cast<int32_t>(st.cursor - st.begin);
  span.ir = classes[ranks[st.rank].cls].ir[st.cursor];
  span.ready = st.ready;
  span.issued = std::max(st.ready, host_clock[static_cast<size_t>(&st - streams.data())]);
  span.start = st.start;
  span.end = end;
  span.iteration = st.iteration;
  return span;
}

void Simulator::Impl::finish_op(uint32_t sid, TimeNs end, const WaitCause* cause) {
  StreamState& st = streams[sid];
  ++ops_done;
  TimeNs& iteration_end = iteration_ends[st.iteration];
  if (end > iteration_end) iteration_end = end;
  if (!observers.empty()) {
    const OpSpan span = span_of(st, end);
    for (Observer* o : observers) o->on_op_end(span);
    if (cause != nullptr) {
      for (Observer* o : observers) o->on_wait_end(span, *cause);
    }
  }
  st.prev_op = static_cast<int32_t>(st.cursor - st.begin);
  st.prev_ready = st.ready;
  st.prev_start = st.start;
  st.prev_end = end;
  ++st.cursor;
  st.status = StreamStatus::kIdle;
}

// ---------------------------------------------------------------- collectives

uint32_t Simulator::Impl::new_instance(int32_t group, uint64_t seq) {
  uint32_t id;
  if (!free_instances.empty()) {
    id = free_instances.back();
    free_instances.pop_back();
  } else {
    id = static_cast<uint32_t>(instances.size());
    instances.emplace_back();
    instances.back().waiters.reserve(static_cast<size_t>(groups[group].expected));
  }
  CollectiveInstance& in = instances[id];
  in.group = group;
  in.seq = seq;
  in.kind = ir::COLLECTIVE_UNSPECIFIED;
  in.bytes = 0;
  in.fixed_ns = 0;
  in.arrived = 0;
  in.done = false;
  in.waiters.clear();
  return id;
}

void Simulator::Impl::arrive_collective(uint32_t sid, const FlatOp& op) {
  StreamState& st = streams[sid];
  const SimRank& rk = ranks[st.rank];
  const int32_t g = slot_group[rk.slot_base + op.slot];
  const uint64_t seq = issue_counts[slot_counter[rk.slot_base + op.slot]]++;
  GroupRuntime& gr = group_runtime[g];
  while (gr.head_seq + gr.pending.size() <= seq) gr.pending.push_back(new_instance(g, gr.head_seq + gr.pending.size()));
  const uint32_t id = gr.pending[seq - gr.head_seq];
  CollectiveInstance& in = instances[id];
  if (in.arrived == 0) {
    in.kind = op.collective;
    in.bytes = op.value;
    in.first = sid;
  } else if (in.kind != op.collective || in.bytes != op.value) {
    throw_collective_mismatch(in, sid, op);
  }
  in.fixed_ns = std::max(in.fixed_ns, op.fixed_ns);
  in.waiters.push_back(sid);
  st.comm = id;
  if (++in.arrived == groups[g].expected) begin_collective(id, op, rk);
}

void Simulator::Impl::begin_collective(uint32_t id, const FlatOp& op, const SimRank& rank) {
  CollectiveInstance& in = instances[id];
  TimeNs duration;
  in.via_model = false;
  if (in.fixed_ns > 0) {
    duration = TimeNs(in.fixed_ns);
  } else if (comm_model != nullptr) {
    in.via_model = true;
  } else {
    const int32_t shape_id = groups[in.group].shape_id;
    int64_t& cached = classes[rank.cls].collective_ns[static_cast<size_t>(op.index) * shapes.size() + shape_id];
    if (cached < 0) cached = comm_costs.collective(in.kind, in.bytes, shapes[shape_id]).count();
    duration = TimeNs(cached);
  }
  in.start = now;
  for (uint32_t w : in.waiters) streams[w].start = now;
  if (slowdown > 0) {
    for (uint32_t w : in.waiters) comm_started_or_ended(streams[w].rank, +1);
  }
  if (in.via_model) {
    comm_model->begin_collective(now, token_of(EngineEvent::kCollectiveDone, id), in.group, in.kind, in.bytes);
    comm_changed();
    return;
  }
  in.completion = schedule_completion(duration, EngineEvent{EngineEvent::kCollectiveDone, id});
}

void Simulator::Impl::complete_collective(uint32_t id) {
  CollectiveInstance& in = instances[id];
  if (in.via_model) {
    comm_model->end(now, token_of(EngineEvent::kCollectiveDone, id));
    comm_changed();
  }
  if (slowdown > 0) {
    for (uint32_t w : in.waiters) comm_started_or_ended(streams[w].rank, -1);
  }
  if (observers.empty()) {
    for (uint32_t w : in.waiters) finish_op(w, now, nullptr);
  } else {
    // The members' spans in arrival order, taken before finish_op moves their
    // cursors on (observers only).
    member_spans.clear();
    for (uint32_t w : in.waiters) member_spans.push_back(span_of(streams[w], now));
    for (uint32_t w : in.waiters) finish_op(w, now, nullptr);
    const CollectiveSpan span{in.group, in.seq, member_spans};
    for (Observer* o : observers) o->on_collective(span);
  }
  for (uint32_t w : in.waiters) worklist.push_back(w);
  in.done = true;
  // Instances of a group may complete out of order (different durations);
  // retire them in issue order.
  GroupRuntime& gr = group_runtime[in.group];
  while (!gr.pending.empty() && instances[gr.pending.front()].done) {
    free_instances.push_back(gr.pending.front());
    gr.pending.erase(gr.pending.begin());
    ++gr.head_seq;
  }
}

// ---------------------------------------------------------------- point to point

void Simulator::Impl::post_p2p(uint32_t sid, const FlatOp& op) {
  StreamState& st = streams[sid];
  const uint32_t mb = endpoint_mailbox[ranks[st.rank].endpoint_base + op.index];
  st.comm = mb;
  Mailbox& m = mailboxes[mb];
  const bool is_send = op.kind == OpKind::kSend;
  if (m.head < m.posts.size() && m.waiting_sends != is_send) {
    const uint32_t other = m.posts[m.head++];
    if (m.head == m.posts.size()) {
      m.posts.clear();
      m.head = 0;
    }
    if (is_send) {
      begin_transfer(sid, other);
    } else {
      begin_transfer(other, sid);
    }
    return;
  }
  if (m.head == m.posts.size()) m.waiting_sends = is_send;
  m.posts.push_back(sid);
}

void Simulator::Impl::begin_transfer(uint32_t send, uint32_t recv) {
  const FlatOp& so = current_op(streams[send]);
  const FlatOp& ro = current_op(streams[recv]);
  if (so.tag != ro.tag || so.value != ro.value) throw_p2p_mismatch(send, recv);
  const bool same_node = ranks[streams[send].rank].node == ranks[streams[recv].rank].node;
  const bool via_model = so.fixed_ns <= 0 && comm_model != nullptr;
  const TimeNs duration =
      so.fixed_ns > 0 ? TimeNs(so.fixed_ns) : (via_model ? TimeNs::zero() : comm_costs.p2p(so.value, same_node));
  uint32_t id;
  if (!free_transfers.empty()) {
    id = free_transfers.back();
    free_transfers.pop_back();
  } else {
    id = static_cast<uint32_t>(transfers.size());
    transfers.emplace_back();
  }
  streams[send].start = now;
  streams[recv].start = now;
  transfers[id].send = send;
  transfers[id].recv = recv;
  transfers[id].start = now;
  transfers[id].via_model = via_model;
  transfers[id].completion = EventId{};
  if (slowdown > 0) {
    comm_started_or_ended(streams[send].rank, +1);
    comm_started_or_ended(streams[recv].rank, +1);
  }
  if (via_model) {
    comm_model->begin_transfer(now, token_of(EngineEvent::kTransferDone, id), ranks[streams[send].rank].rank,
                               ranks[streams[recv].rank].rank, so.value);
    comm_changed();
    return;
  }
  transfers[id].completion = schedule_completion(duration, EngineEvent{EngineEvent::kTransferDone, id});
}

void Simulator::Impl::complete_transfer(uint32_t id) {
  const Transfer t = transfers[id];
  free_transfers.push_back(id);
  if (t.via_model) {
    comm_model->end(now, token_of(EngineEvent::kTransferDone, id));
    comm_changed();
  }
  if (slowdown > 0) {
    comm_started_or_ended(streams[t.send].rank, -1);
    comm_started_or_ended(streams[t.recv].rank, -1);
  }
  if (observers.empty()) {
    finish_op(t.send, now, nullptr);
    finish_op(t.recv, now, nullptr);
  } else {
    const OpSpan send_span = span_of(streams[t.send], now);
    const OpSpan recv_span = span_of(streams[t.recv], now);
    finish_op(t.send, now, nullptr);
    finish_op(t.recv, now, nullptr);
    for (Observer* o : observers) o->on_transfer(send_span, recv_span);
  }
  worklist.push_back(t.send);
  worklist.push_back(t.recv);
}

// ---------------------------------------------------------------- communication model, interference

void Simulator::Impl::comm_changed() {
  if (comm_settle_pending) return;  // the settle takes this call's updates too
  if (!comm_model->deferred()) {
    apply_comm_updates();
    return;
  }
  comm_settle_pending = true;
  // FIFO among ties: it pops after every event already queued for `now`.
  queue.schedule(now, EngineEvent{EngineEvent::kCommSettle, 0});
}

void Simulator::Impl::apply_comm_updates() {
  for (const CompletionUpdate& u : comm_model->take_updates()) {
    const EngineEvent ev = event_of(u.token);
    EventId* completion = nullptr;
    if (ev.kind == EngineEvent::kCollectiveDone && ev.index < instances.size()) {
      completion = &instances[ev.index].completion;
    } else if (ev.kind == EngineEvent::kTransferDone && ev.index < transfers.size()) {
      completion = &transfers[ev.index].completion;
    } else {
      throw Error("communication model '" + std::string(comm_model->name()) + "' returned an unknown token " +
                  std::to_string(u.token));
    }
    if (u.at < now) {
      throw Error("communication model '" + std::string(comm_model->name()) + "' scheduled a completion at t = " +
                  std::to_string(u.at.count()) + " ns, before the current time " + std::to_string(now.count()) + " ns");
    }
    queue.cancel(*completion);
    *completion = schedule_completion(u.at - now, ev);
  }
  if (comm_wakeups) sync_comm_wakeup();
}

void Simulator::Impl::sync_comm_wakeup() {
  const TimeNs at = comm_model->next_wakeup();
  if (at == wakeup_at) return;
  if (at < now) {
    throw Error("communication model '" + std::string(comm_model->name()) + "' asked for a wakeup at t = " +
                std::to_string(at.count()) + " ns, before the current time " + std::to_string(now.count()) + " ns");
  }
  queue.cancel(wakeup_event);
  wakeup_at = at;
  wakeup_event = at == TimeNs::max() ? EventId{} : queue.schedule(at, EngineEvent{EngineEvent::kCommWakeup, 0});
}

void Simulator::Impl::comm_wakeup() {
  wakeup_at = TimeNs::max();
  wakeup_event = EventId{};
  // Once every stream is done nothing can be affected; and with nothing else
  // pending no operation is in flight for a change of links to release: the
  // streams left are deadlocked, which the end of run() reports.
  if (live_streams == 0 || queue.empty()) return;
  comm_model->wakeup(now);
  comm_changed();
}

TimeNs Simulator::Impl::interfered_duration(double work_ns, bool slowed) const {
  const double d = slowed ? work_ns * (1.0 + slowdown) : work_ns;
  return TimeNs(static_cast<int64_t>(std::ceil(d)));
}

void Simulator::Impl::comm_started_or_ended(uint32_t rank, int delta) {
  SimRank& rk = ranks[rank];
  const bool was = rk.comm_in_flight > 0;
  rk.comm_in_flight += delta;
  const bool is = rk.comm_in_flight > 0;
  if (was == is) return;
  // Re-time the rank's running compute ops: the work done so far at the old
  // speed, the rest at the new one.
  for (uint32_t s = rk.stream_base; s < rk.stream_base + rk.num_streams; ++s) {
    StreamState& st = streams[s];
    if (st.status != StreamStatus::kRunning) continue;
    const double elapsed = static_cast<double>((now - st.work_since).count());
    st.work_left_ns = std::max(0.0, st.work_left_ns - (st.slowed ? elapsed / (1.0 + slowdown) : elapsed));
    st.work_since = now;
    st.slowed = is;
    queue.cancel(st.compute_done);
    st.compute_done = schedule_completion(interfered_duration(st.work_left_ns, st.slowed),
                                          EngineEvent{EngineEvent::kOpDone, s});
  }
}

// ---------------------------------------------------------------- public API

Simulator::Simulator(const ir::Program& program, const cost::CostModel& cost, SimulationOptions options)
    : impl_(std::make_unique<Impl>(program, cost, options)) {}

Simulator::~Simulator() = default;

void Simulator::add_observer(Observer* observer) {
  if (observer == nullptr) throw Error("Simulator::add_observer: null observer");
  impl_->observers.push_back(observer);
}

SimulationResult Simulator::run() { return impl_->run(); }

}  // namespace lacuna::engine
