// Runs n independent work items over every process of the run (World) and
// `jobs` threads in each, and merges their results on the root in index
// order: the merged records do not depend on the number of processes or
// threads, nor on which ran what (docs/search.md#many-machines).
//
// Each item's result is a record (bytes the caller serializes). Items are
// dealt to processes by longest-processing-time-first on their expected
// costs (deterministic: ties by index), so a few expensive items do not all
// land on one process; inside a process, threads take its items in order
// from an atomic counter. One gather moves the records to the root.
#pragma once

#include <cstddef>
#include <functional>
#include <string>
#include <vector>

#include "sim/parallel/processes.h"

namespace lacuna::parallel {

// Called after each item this process finished, under a lock (one call at a
// time): items done here, items this process owns, and the finished item's
// index and record.
using ItemDone = std::function<void(size_t done, size_t owned, size_t index, const std::string& record)>;

// Which process owns each item: LPT over `costs` (all equal when empty).
std::vector<int> assign_items(size_t n, int processes, const std::vector<double>& costs);

// Runs item(i) for every i in [0, n) and returns, on the root, all n records
// in index order; on other processes an empty vector. If item(i) throws on
// any process, every process throws after the gather: the root and the
// others alike report the lowest failing index's message (a lacuna::Error).
std::vector<std::string> map_items(const World& world, size_t n, int jobs,
                                   const std::function<std::string(size_t)>& item,
                                   const std::vector<double>& costs = {}, const ItemDone& done = {});

// Sends the root's `text` to every process (for decisions the root makes
// after a merge, e.g. which candidates to simulate). No-op in one process.
std::string broadcast_from_root(const World& world, std::string text);

}  // namespace lacuna::parallel
