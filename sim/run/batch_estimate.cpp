#include "sim/run/batch_estimate.h"

#include <algorithm>
#include <cstring>

#include <fmt/format.h>

#include "sim/core/error.h"
#include "sim/report/formats/format.h"

namespace lacuna::run {
namespace {

// An item's estimate as it travels (memcpy of plain fields, one layout on
// every process of a run: they run the same binary).
struct WireItem {
  uint8_t compiled = 0, kept = 0;
  uint64_t events = 0, host_events = 0;
  int64_t program = 0, run = 0;
  double compile_s = 0;
};

double item_seconds(const ItemEstimate& e, double events_per_s) {
  return static_cast<double>(e.events) / events_per_s + (e.kept ? 0.0 : e.compile_s);
}

// A wall time for people: the estimate is good to a factor of about two
// (docs/performance.md#batch-estimate), so two significant figures.
std::string format_wall(double s) {
  if (s < 1) return "under 1 s";
  if (s < 120) return fmt::format("about {:.0f} s", s);
  if (s < 7200) return fmt::format("about {:.0f} min", s / 60);
  return fmt::format("about {:.1f} h", s / 3600);
}

}  // namespace

std::string encode_item_estimate(const ItemEstimate& e) {
  const WireItem w{static_cast<uint8_t>(e.compiled), static_cast<uint8_t>(e.kept), e.events, e.host_events,
                   e.program.count(), e.run.count(), e.compile_s};
  std::string out(sizeof w, '\0');
  std::memcpy(out.data(), &w, sizeof w);
  return out;
}

ItemEstimate decode_item_estimate(const std::string& record) {
  WireItem w;
  if (record.size() != sizeof w) throw InternalError("an item estimate record of the wrong size");
  std::memcpy(&w, record.data(), sizeof w);
  ItemEstimate e;
  e.compiled = w.compiled != 0;
  e.kept = w.kept != 0;
  e.events = w.events;
  e.host_events = w.host_events;
  e.program = Bytes(w.program);
  e.run = Bytes(w.run);
  e.compile_s = w.compile_s;
  return e;
}

double events_per_second(NetworkMode network, bool folded) {
  if (folded) return network == NetworkMode::kFlow ? kFoldedFlowEventsPerSecond : kFoldedAnalyticEventsPerSecond;
  return network == NetworkMode::kFlow ? kFlowEventsPerSecond : kAnalyticEventsPerSecond;
}

std::vector<size_t> estimate_sample(const std::vector<std::vector<double>>& proxies, size_t items,
                                    size_t per_proxy) {
  std::vector<char> chosen(items, 0);
  for (const std::vector<double>& proxy : proxies) {
    if (proxy.size() != items) throw InternalError("a cost proxy of the wrong length");
    std::vector<size_t> order(items);
    for (size_t i = 0; i < items; ++i) order[i] = i;
    const size_t k = std::min(per_proxy, items);
    std::partial_sort(order.begin(), order.begin() + static_cast<std::ptrdiff_t>(k), order.end(),
                      [&](size_t a, size_t b) { return proxy[a] != proxy[b] ? proxy[a] > proxy[b] : a < b; });
    for (size_t i = 0; i < k; ++i) chosen[order[i]] = 1;
  }
  std::vector<size_t> out;
  for (size_t i = 0; i < items; ++i)
    if (chosen[i]) out.push_back(i);
  return out;
}

BatchEstimate estimate_batch(const std::vector<ItemEstimate>& sampled, size_t items, double scale, int threads,
                             int processes, NetworkMode network, bool folded) {
  BatchEstimate b;
  b.items = items;
  b.sampled = sampled.size();
  b.concurrent = std::max(1, threads);
  b.processes = std::max(1, processes);
  const double rate = events_per_second(network, folded);
  std::vector<int64_t> adds;
  double events = 0, host_events = 0, total_s = 0, longest_s = 0, compile_s = 0;
  for (const ItemEstimate& e : sampled) {
    if (!e.compiled) {
      ++b.failed;
      continue;
    }
    events += static_cast<double>(e.events);
    host_events += static_cast<double>(e.host_events);
    // A kept program is already in the resident set.
    adds.push_back(e.kept ? e.run.count() : (e.run + e.program).count());
    b.largest = std::max(b.largest, Bytes(e.run + e.program));
    if (!e.kept) compile_s += e.compile_s;
    const double s = item_seconds(e, rate);
    total_s += s;
    longest_s = std::max(longest_s, s);
  }
  // The sampled items are kept, so the others' compiles are the sample's
  // compile time scaled, less the sample's own share.
  double sample_compile_s = 0;
  for (const ItemEstimate& e : sampled) sample_compile_s += e.compiled ? e.compile_s : 0;
  b.events = static_cast<uint64_t>(events * scale);
  b.host_events = static_cast<uint64_t>(host_events * scale);
  b.compile_s = compile_s + sample_compile_s * std::max(0.0, scale - 1);
  const double scaled_s = total_s + (events / rate + sample_compile_s) * std::max(0.0, scale - 1);
  const size_t in_flight = std::min(adds.size(), static_cast<size_t>(b.concurrent));
  std::partial_sort(adds.begin(), adds.begin() + static_cast<std::ptrdiff_t>(in_flight), adds.end(),
                    std::greater<>());
  for (size_t k = 0; k < in_flight; ++k) b.in_flight = b.in_flight + Bytes(adds[k]);
  b.seconds = std::max(longest_s, scaled_s / (static_cast<double>(b.concurrent) * b.processes));
  return b;
}

std::string describe_batch(const BatchEstimate& b, const std::string& noun) {
  std::string sample;
  if (b.sampled < b.items) sample = fmt::format(" ({} compiled for the estimate)", b.sampled);
  std::string failed;
  if (b.failed > 0) failed = fmt::format(" ({} of them fail to compile)", b.failed);
  std::string host;
  if (b.host_events > 0)
    host = fmt::format(" (up to {} with late hosts)",
                       report::format_si(static_cast<double>(b.events + b.host_events), "events"));
  return fmt::format("{} {}{}{}: {}{}, at most {:.2f} GB in flight ({} at once), {} on {} process{} x {} "
                     "thread{}",
                     b.items, noun, sample, failed, report::format_si(static_cast<double>(b.events), "events"), host,
                     b.in_flight.gb(), std::min<size_t>(b.items, static_cast<size_t>(b.concurrent)),
                     format_wall(b.seconds), b.processes, b.processes == 1 ? "" : "es", b.concurrent,
                     b.concurrent == 1 ? "" : "s");
}

void estimate_compiled(const ir::Program& program, const cost::CostModel& cost, const RunSettings& settings,
                       ItemEstimate& e) {
  const SimulationRun run(program, cost, settings);
  const RunEstimate r = run.estimate();
  e.events = r.events;
  e.host_events = r.host_events;
  e.run = r.total();
  e.program = Bytes(static_cast<int64_t>(program.SpaceUsedLong()));
  e.compiled = true;
}

BatchEstimate estimate_sampled_batch(const std::vector<std::string>& records, const std::vector<size_t>& sample,
                                     const std::vector<double>& proxy, int threads, int processes,
                                     NetworkMode network, bool folded) {
  if (records.size() != sample.size()) throw InternalError("a sample's records and indices differ in number");
  std::vector<ItemEstimate> items;
  items.reserve(records.size());
  for (const std::string& record : records) items.push_back(decode_item_estimate(record));
  double all = 0, sampled = 0;
  for (double c : proxy) all += c;
  for (size_t i : sample) sampled += proxy.at(i);
  return estimate_batch(items, proxy.size(), sampled > 0 ? all / sampled : 1.0, threads, processes, network, folded);
}

void check_batch_memory(const BatchEstimate& b, Bytes resident, Bytes limit, const std::string& option,
                        const std::string& noun, const std::string& fewer) {
  if (limit <= Bytes::zero() || Bytes(resident + b.in_flight) <= limit) return;
  throw Error(SourceLocation{{}, 0, 0, option},
              fmt::format("the {} would need about {:.2f} GB: {:.2f} GB held now (inputs, compiled {} kept for "
                          "their runs) and up to {:.2f} GB for the {} {} in flight at once (the largest alone "
                          "{:.2f} GB), above the limit of {:.2f} GB",
                          noun, Bytes(resident + b.in_flight).gb(), resident.gb(), noun, b.in_flight.gb(),
                          std::min<size_t>(b.items, static_cast<size_t>(b.concurrent)), noun,
                          b.largest.gb(), limit.gb()),
              fmt::format("run fewer at once (‹j›), {}, or raise {}", fewer, option));
}

Bytes prepared_budget(Bytes limit) {
  const Bytes base = limit > Bytes::zero() ? limit : default_memory_limit();
  return Bytes(base.count() / 4);
}

}  // namespace lacuna::run
