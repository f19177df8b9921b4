#include "sim/report/formats/diff_format.h"

#include <algorithm>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "sim/core/units.h"
#include "sim/report/formats/format.h"
#include "sim/report/formats/json_util.h"

namespace lacuna::report {

namespace {

std::string dur(int64_t ns) { return format_duration(TimeNs(ns)); }

std::string rank_list(const std::vector<int32_t>& ranks) {
  if (ranks.empty()) return "none";
  std::string out;
  for (int32_t r : ranks) out += (out.empty() ? "" : ", ") + std::to_string(r);
  return out;
}

std::string mb_text(int32_t microbatch) { return microbatch < 0 ? "-" : std::to_string(microbatch); }

// The op a bubble precedes: its class (the tail has none).
std::string bubble_class(const BubbleMismatch& b) { return b.op < 0 ? "(iteration end)" : b.cls; }

void print_mismatches(std::string& out, const char* title, const std::vector<BubbleMismatch>& list, size_t top) {
  if (list.empty()) {
    out += fmt::format("    {}: none\n", title);
    return;
  }
  const size_t shown = std::min(top, list.size());
  out += fmt::format("    {}: {}{}\n", title, list.size(),
                     shown < list.size() ? fmt::format(" (the {} largest shown)", shown) : std::string());
  if (shown == 0) return;
  size_t class_w = 5;
  for (size_t i = 0; i < shown; ++i) class_w = std::max(class_w, display_columns(bubble_class(list[i])));
  out += fmt::format("      {}  {}  {}  {}  {}  {}  {}\n", pad_left("rank", 6), pad_left("op", 6),
                     pad_right("class", class_w), pad_right("phase", 5), pad_left("mb", 4),
                     pad_left("predicted gap", 14), pad_left("measured gap", 14));
  for (size_t i = 0; i < shown; ++i) {
    const BubbleMismatch& b = list[i];
    out += fmt::format("      {}  {}  {}  {}  {}  {}  {}\n", pad_left(std::to_string(b.rank), 6),
                       pad_left(b.op < 0 ? "end" : std::to_string(b.op), 6), pad_right(bubble_class(b), class_w),
                       pad_right(b.op < 0 ? "" : phase_letter(b.phase), 5), pad_left(b.op < 0 ? "" : mb_text(b.microbatch), 4),
                       pad_left(dur(b.predicted_gap_ns), 14), pad_left(dur(b.measured_gap_ns), 14));
  }
  if (shown < list.size()) out += fmt::format("      ... and {} more\n", list.size() - shown);
}

using json_util::Json;

Json error_json(const std::optional<double>& e) { return e ? Json(*e) : Json(nullptr); }

Json mismatch_json(const BubbleMismatch& b) {
  Json j;
  j["rank"] = b.rank;
  j["stream"] = b.stream;
  j["op"] = b.op;  // -1: the tail (last op's end → iteration end)
  j["class"] = b.cls;
  j["phase"] = b.phase;
  j["microbatch"] = b.microbatch;
  j["module"] = b.module;
  j["predicted_from_ns"] = b.predicted_from_ns;
  j["predicted_gap_ns"] = b.predicted_gap_ns;
  j["measured_from_ns"] = b.measured_from_ns;
  j["measured_gap_ns"] = b.measured_gap_ns;
  return j;
}

}  // namespace

std::string format_error_percent(const std::optional<double>& error) {
  if (!error) return "—";
  return fmt::format("{:+.2f} %", *error * 100.0);
}

std::string format_diff(const DiffReport& r, size_t top) {
  std::string out = fmt::format("lacuna diff: {}\n\n", r.scenario);
  auto line = [&out](const std::string& key, const std::string& value) {
    out += fmt::format("  {} {}\n", pad_right(key, 24), value);
  };
  auto with_model = [](const std::string& file, const std::string& model) {
    return model.empty() ? file : fmt::format("{}  ({})", file, model);
  };
  line("predicted", with_model(r.predicted_file, r.predicted_cost_model));
  line("measured", with_model(r.measured_file, r.measured_cost_model));
  line("GPUs", std::to_string(r.num_gpus));
  std::string ranks = rank_list(r.compared_ranks);
  if (!r.only_predicted_ranks.empty()) ranks += "; only in predicted: " + rank_list(r.only_predicted_ranks);
  if (!r.only_measured_ranks.empty()) ranks += "; only in measured: " + rank_list(r.only_measured_ranks);
  line("ranks compared", ranks);
  out += "\n";
  line("iteration time", fmt::format("predicted {} · measured {} · error {}", dur(r.predicted_iteration_ns),
                                     dur(r.measured_iteration_ns), format_error_percent(r.iteration_error)));
  out += "\n";

  // Per op class.
  size_t w = 22;
  for (const ClassDiff& c : r.classes) w = std::max(w, display_columns(c.cls) + 2);
  out += fmt::format("  {} {} {} {} {}\n", pad_right("op class", w + 2), pad_left("ops", 8),
                     pad_left("predicted", 14), pad_left("measured", 14), pad_left("error", 10));
  for (const ClassDiff& c : r.classes) {
    out += fmt::format("    {} {} {} {} {}\n", pad_right(c.cls, w), pad_left(std::to_string(c.ops), 8),
                       pad_left(dur(c.predicted_ns), 14), pad_left(dur(c.measured_ns), 14),
                       pad_left(format_error_percent(c.error), 10));
  }
  if (r.classes.empty()) out += "    (no ops on the compared ranks)\n";
  out += "\n";

  // Per stream.
  w = 22;
  auto stream_label = [](const StreamDiff& s) { return fmt::format("rank {} {}", s.rank, s.name); };
  for (const StreamDiff& s : r.streams) w = std::max(w, display_columns(stream_label(s)) + 2);
  out += fmt::format("  {} {} {} {} {} {} {}\n", pad_right("stream busy time", w + 2), pad_left("ops", 8),
                     pad_left("predicted", 14), pad_left("measured", 14), pad_left("error", 10),
                     pad_left("predicted end", 15), pad_left("measured end", 15));
  for (const StreamDiff& s : r.streams) {
    out += fmt::format("    {} {} {} {} {} {} {}\n", pad_right(stream_label(s), w), pad_left(std::to_string(s.ops), 8),
                       pad_left(dur(s.predicted_busy_ns), 14), pad_left(dur(s.measured_busy_ns), 14),
                       pad_left(format_error_percent(s.error), 10), pad_left(dur(s.predicted_end_ns), 15),
                       pad_left(dur(s.measured_end_ns), 15));
  }
  out += "\n";

  // Bubbles.
  out += fmt::format("  compute-stream bubbles (gaps ≥ {}{})\n", dur(r.min_bubble_ns),
                     r.min_bubble_default ? ", 1 % of the predicted iteration" : "");
  out += fmt::format("    predicted {} · measured {} · in both {}\n", r.predicted_bubbles, r.measured_bubbles,
                     r.matched_bubbles);
  print_mismatches(out, "predicted but not observed", r.predicted_not_observed, top);
  print_mismatches(out, "observed but not predicted", r.observed_not_predicted, top);
  out += "\n";

  // Bubble categories.
  const size_t with_both = r.compared_ranks.size() - r.bubble_ranks_missing.size();
  out += fmt::format("  {} {} {} {}\n",
                     pad_right(fmt::format("bubble time (sum over {} rank{})", with_both, with_both == 1 ? "" : "s"), 36),
                     pad_left("predicted", 14), pad_left("measured", 14), pad_left("error", 10));
  for (const BubbleCategoryDiff& c : r.bubble_categories) {
    out += fmt::format("    {} {} {} {}\n", pad_right(c.category, 34), pad_left(dur(c.predicted_ns), 14),
                       pad_left(dur(c.measured_ns), 14), pad_left(format_error_percent(c.error), 10));
  }
  if (!r.bubble_ranks_missing.empty()) {
    out += fmt::format("    (no ranks[] entry in both files for rank {})\n", rank_list(r.bubble_ranks_missing));
  }
  return out;
}

std::string diff_json(const DiffReport& r) {
  Json top;
  top["predicted_file"] = r.predicted_file;
  top["measured_file"] = r.measured_file;
  top["scenario"] = r.scenario;
  top["num_gpus"] = r.num_gpus;
  top["predicted_cost_model"] = r.predicted_cost_model;
  top["measured_cost_model"] = r.measured_cost_model;
  top["iteration_time"] = Json{{"predicted_ns", r.predicted_iteration_ns},
                               {"measured_ns", r.measured_iteration_ns},
                               {"error", error_json(r.iteration_error)}};
  top["ranks"] = Json{{"compared", r.compared_ranks},
                      {"only_predicted", r.only_predicted_ranks},
                      {"only_measured", r.only_measured_ranks}};
  Json classes = Json::array();
  for (const ClassDiff& c : r.classes) {
    classes.push_back(Json{{"class", c.cls},
                           {"ops", c.ops},
                           {"predicted_ns", c.predicted_ns},
                           {"measured_ns", c.measured_ns},
                           {"error", error_json(c.error)}});
  }
  top["op_classes"] = classes;
  Json streams = Json::array();
  for (const StreamDiff& s : r.streams) {
    streams.push_back(Json{{"rank", s.rank},
                           {"stream", s.stream},
                           {"name", s.name},
                           {"kind", s.kind},
                           {"ops", s.ops},
                           {"predicted_busy_ns", s.predicted_busy_ns},
                           {"measured_busy_ns", s.measured_busy_ns},
                           {"error", error_json(s.error)},
                           {"predicted_end_ns", s.predicted_end_ns},
                           {"measured_end_ns", s.measured_end_ns}});
  }
  top["streams"] = streams;
  Json not_observed = Json::array();
  for (const BubbleMismatch& b : r.predicted_not_observed) not_observed.push_back(mismatch_json(b));
  Json not_predicted = Json::array();
  for (const BubbleMismatch& b : r.observed_not_predicted) not_predicted.push_back(mismatch_json(b));
  top["bubbles"] = Json{{"min_bubble_ns", r.min_bubble_ns},
                        {"min_bubble_default", r.min_bubble_default},
                        {"predicted", r.predicted_bubbles},
                        {"measured", r.measured_bubbles},
                        {"matched", r.matched_bubbles},
                        {"predicted_not_observed", not_observed},
                        {"observed_not_predicted", not_predicted}};
  Json categories = Json::array();
  for (const BubbleCategoryDiff& c : r.bubble_categories) {
    categories.push_back(Json{{"category", c.category},
                              {"predicted_ns", c.predicted_ns},
                              {"measured_ns", c.measured_ns},
                              {"error", error_json(c.error)}});
  }
  top["bubble_categories"] = Json{{"ranks_missing", r.bubble_ranks_missing}, {"categories", categories}};
  return json_util::top_level_lines(top);
}

}  // namespace lacuna::report
