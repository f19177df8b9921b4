#include "sim/parallel/work_split.h"

#include <algorithm>
#include <climits>
#include <cstdint>
#include <cstring>
#include <exception>
#include <mutex>
#include <numeric>

#include "sim/core/error.h"
#include "sim/core/parallel_map.h"

#ifdef LACUNA_WITH_MPI
#include <mpi.h>
#endif

namespace lacuna::parallel {

std::vector<int> assign_items(size_t n, int processes, const std::vector<double>& costs) {
  std::vector<int> owner(n, 0);
  if (processes <= 1) return owner;
  std::vector<size_t> order(n);
  std::iota(order.begin(), order.end(), size_t{0});
  if (!costs.empty()) {
    if (costs.size() != n) throw InternalError("assign_items: one cost per item");
    std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return costs[a] > costs[b]; });
  }
  std::vector<double> load(static_cast<size_t>(processes), 0.0);
  for (size_t i : order) {
    // The least loaded process, lowest rank on ties.
    const auto least = std::min_element(load.begin(), load.end());
    owner[i] = static_cast<int>(least - load.begin());
    *least += costs.empty() ? 1.0 : std::max(costs[i], 1e-12);
  }
  return owner;
}

namespace {

struct LocalResults {
  std::vector<size_t> items;  // the indices this process owns, ascending
  std::vector<std::string> records;
  std::vector<std::exception_ptr> errors;
  size_t first_failure = SIZE_MAX;  // position in `items`
};

// This process's items on `jobs` threads: the shared pool of
// sim/core/parallel_map.h, each item's failure kept beside it (the gather
// reports the lowest failing index across processes, not this process's).
LocalResults run_local(const std::vector<size_t>& items, int jobs,
                       const std::function<std::string(size_t)>& item, const ItemDone& done) {
  struct Outcome {
    std::string record;
    std::exception_ptr error;
  };
  std::mutex lock;
  size_t finished = 0;
  std::vector<Outcome> outcomes = parallel_map(items.size(), jobs, [&](size_t k) {
    Outcome o;
    try {
      o.record = item(items[k]);
    } catch (...) {
      o.error = std::current_exception();
      return o;
    }
    if (done) {
      std::lock_guard<std::mutex> hold(lock);
      ++finished;
      done(finished, items.size(), items[k], o.record);
    }
    return o;
  });
  LocalResults out;
  out.items = items;
  out.records.reserve(items.size());
  out.errors.reserve(items.size());
  for (size_t k = 0; k < outcomes.size(); ++k) {
    out.records.push_back(std::move(outcomes[k].record));
    out.errors.push_back(outcomes[k].error);
    if (outcomes[k].error && out.first_failure == SIZE_MAX) out.first_failure = k;
  }
  return out;
}

std::string message_of(const std::exception_ptr& e) {
  try {
    std::rethrow_exception(e);
  } catch (const std::exception& x) {
    return x.what();
  } catch (...) {
    return "unknown exception";
  }
}

#ifdef LACUNA_WITH_MPI
void put_u64(std::string& out, uint64_t v) { out.append(reinterpret_cast<const char*>(&v), sizeof v); }
uint64_t get_u64(const char*& p) {
  uint64_t v = 0;
  std::memcpy(&v, p, sizeof v);
  p += sizeof v;
  return v;
}

int checked_int(size_t bytes, const char* what) {
  if (bytes > static_cast<size_t>(INT_MAX)) {
    throw Error(std::string("the ") + what + " of one MPI process exceed 2 GiB; run with more processes");
  }
  return static_cast<int>(bytes);
}
#endif

}  // namespace

std::vector<std::string> map_items(const World& world, size_t n, int jobs,
                                   const std::function<std::string(size_t)>& item,
                                   const std::vector<double>& costs, const ItemDone& done) {
  const std::vector<int> owner = assign_items(n, world.size, costs);
  std::vector<size_t> mine;
  for (size_t i = 0; i < n; ++i) {
    if (owner[i] == world.rank) mine.push_back(i);
  }
  LocalResults local = run_local(mine, jobs, item, done);
  if (world.size <= 1) {
    if (local.first_failure != SIZE_MAX) std::rethrow_exception(local.errors[local.first_failure]);
    return std::move(local.records);
  }
#ifdef LACUNA_WITH_MPI
  // Pack: per item, its index, a failure flag, and the record or the message.
  std::string packed;
  for (size_t k = 0; k < mine.size(); ++k) {
    const bool failed = static_cast<bool>(local.errors[k]);
    const std::string& body = failed ? message_of(local.errors[k]) : local.records[k];
    put_u64(packed, mine[k]);
    put_u64(packed, failed ? 1 : 0);
    put_u64(packed, body.size());
    packed += body;
    if (!failed) std::string().swap(local.records[k]);  // keep one copy
  }
  const int size = checked_int(packed.size(), "records");
  std::vector<int> sizes(static_cast<size_t>(world.size), 0);
  MPI_Gather(&size, 1, MPI_INT, sizes.data(), 1, MPI_INT, 0, MPI_COMM_WORLD);
  std::vector<int> offsets(sizes.size(), 0);
  size_t total = 0;
  for (size_t p = 0; p < sizes.size(); ++p) {
    offsets[p] = checked_int(total, "records");
    total += static_cast<size_t>(sizes[p]);
  }
  std::string all(world.root() ? total : 0, '\0');
  MPI_Gatherv(packed.data(), size, MPI_CHAR, all.data(), sizes.data(), offsets.data(), MPI_CHAR, 0, MPI_COMM_WORLD);
  std::vector<std::string> records;
  std::string failure;
  if (world.root()) {
    records.resize(n);
    size_t lowest = SIZE_MAX;
    const char* p = all.data();
    const char* end = all.data() + all.size();
    while (p < end) {
      const uint64_t index = get_u64(p);
      const uint64_t failed = get_u64(p);
      const uint64_t len = get_u64(p);
      std::string body(p, static_cast<size_t>(len));
      p += len;
      if (index >= n) throw InternalError("map_items: a record for an item out of range");
      if (failed != 0) {
        if (index < lowest) {
          lowest = index;
          failure = std::move(body);
        }
      } else {
        records[index] = std::move(body);
      }
    }
  }
  // Every process learns whether some item failed, and throws alike.
  failure = broadcast_from_root(world, failure);
  if (!failure.empty()) {
    if (local.first_failure != SIZE_MAX && message_of(local.errors[local.first_failure]) == failure) {
      std::rethrow_exception(local.errors[local.first_failure]);
    }
    throw Error(failure);
  }
  return records;
#else
  throw InternalError("map_items: several processes without MPI");
#endif
}

std::string broadcast_from_root(const World& world, std::string text) {
  if (world.size <= 1) return text;
#ifdef LACUNA_WITH_MPI
  uint64_t len = world.root() ? text.size() : 0;
  MPI_Bcast(&len, 1, MPI_UINT64_T, 0, MPI_COMM_WORLD);
  text.resize(static_cast<size_t>(len));
  const int count = checked_int(text.size(), "broadcast text");
  if (count > 0) MPI_Bcast(text.data(), count, MPI_CHAR, 0, MPI_COMM_WORLD);
  return text;
#else
  throw InternalError("broadcast_from_root: several processes without MPI");
#endif
}

}  // namespace lacuna::parallel
