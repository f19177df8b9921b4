// What `lacuna search` prints and writes (docs/search.md#outputs): the fate
// counts, the top-N table, and CSV, JSON and a Pareto-front SVG of every
// candidate. Outputs hold no timings, process or thread counts, so a search
// writes the same bytes serially, on every core and over MPI ranks.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "sim/search/search_run.h"

namespace lacuna::search {

// The fate counts, the rank correlation and the top `n` simulated plans.
std::string format_search(const SearchResult& result, size_t n);

// One row per candidate, in id order.
std::string search_csv(const SearchResult& result);

// The summary (counts, correlation, the top `n`, the Pareto fronts) and,
// unless `summary_only`, every candidate as rows under "columns".
std::string search_json(const SearchResult& result, size_t n, bool summary_only);

// Tokens/s against peak memory (and against GPUs when the GPU count is
// free), screened plans as dots, simulated plans as rings, each front drawn.
std::string search_svg(const SearchResult& result);

// Indices (into `xs`) of the points no other point beats: lower or equal x
// and higher or equal y, one strictly. Sorted by x ascending.
std::vector<size_t> pareto_front(const std::vector<double>& xs, const std::vector<double>& ys);

}  // namespace lacuna::search
