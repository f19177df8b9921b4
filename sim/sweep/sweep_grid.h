// The points of `lacuna sweep` (docs/sweep.md): each `--set FIELD=V1,V2,…`
// is an axis, and the points are the cartesian product of the axes, the last
// axis varying fastest (as nested loops read left to right), or with --zip
// the axes advanced together (a list of one value held fixed). A point is the list of `--set FIELD=VALUE`
// edits `lacuna simulate` would take, so it is checked and run exactly like
// one (sim/scenario/edits.h).
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "sim/proto/scenario.pb.h"

namespace lacuna::sweep {

// Splits a list at its top-level commas: not inside {}, [] or <> (a message
// or a list value) nor inside "quotes". Spaces around a value are kept (the
// text-format parser ignores them). Throws lacuna::Error naming `flag` for
// unbalanced brackets or quotes.
std::vector<std::string> split_values(std::string_view text, const std::string& flag);

// One --set FIELD=V1,V2,…: the field path and its values, in order.
struct Axis {
  std::string field;
  std::vector<std::string> values;
  std::string flag;  // option_ref("set", "FIELD=V1,V2"), as given, for messages
};

// Throws lacuna::Error naming the flag for a missing '=', an empty field, an
// empty list or an empty value in it.
Axis parse_axis(const std::string& assignment);

// The most points a sweep may have: each point is a simulation, and a typo
// in a product of lists should fail at once, not after hours.
inline constexpr size_t kMaxPoints = 100'000;

class Grid {
 public:
  // Throws lacuna::Error for no axis, a field swept twice, lists of unequal
  // lengths (other than 1) under zip, or more than kMaxPoints points.
  Grid(std::vector<Axis> axes, bool zip);

  const std::vector<Axis>& axes() const { return axes_; }
  bool zip() const { return zip_; }
  size_t size() const { return size_; }

  // The index into each axis's values at `point` (0-based).
  std::vector<size_t> value_indices(size_t point) const;
  // FIELD=VALUE for each axis, as --set takes them; a value written in
  // brackets, [a,b], is the list a,b of a repeated field.
  std::vector<std::string> assignments(size_t point) const;
  // "cluster.num_nodes=7, training.global_batch=96" (values as written).
  std::string describe(size_t point) const;

 private:
  std::vector<Axis> axes_;
  bool zip_ = false;
  size_t size_ = 0;
};

// `--set` flags into a grid (parse_axis, then Grid).
Grid make_grid(const std::vector<std::string>& sets, bool zip);

// Every value of every axis set on a copy of the scenario as parsed (before
// presets and validation): an unknown field or a value its field cannot take
// fails here, naming the flag and the value, before any point is built.
void check_fields(const Grid& grid, const scenario::Scenario& raw);

}  // namespace lacuna::sweep
