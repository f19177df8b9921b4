// Reading the JSON of `lacuna simulate --json` / `lacuna execute --json` for
// `lacuna diff`: only the keys the comparison needs, every one checked, so a
// truncated or foreign file gives an error naming the file and the key rather
// than a crash or a silently wrong diff.
#include <algorithm>
#include <fstream>
#include <limits>
#include <map>
#include <set>
#include <sstream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "sim/core/error.h"
#include "sim/core/input_file.h"
#include "sim/core/units.h"
#include "sim/proto/program.pb.h"
#include "sim/report/analyses/diff.h"
#include "sim/report/formats/names.h"
#include "sim/report/formats/span_trace.h"

namespace lacuna::report {

namespace {

// Key order matters for ranks[].bubble_s (printed in the file's order).
using Json = nlohmann::ordered_json;

// Files without `timeline.op_fields`: [op, class, phase, microbatch, module,
// ready_ns, start_ns, end_ns].
constexpr size_t kOpFields = 8;

class Reader {
 public:
  explicit Reader(const std::string& file) : file_(file) {}

  [[noreturn]] void fail(const std::string& field, const std::string& what, const std::string& fix = {}) const {
    throw Error(SourceLocation{file_, 0, 0, field}, what, fix);
  }

  const Json& member(const Json& obj, const std::string& key, const std::string& parent) const {
    const std::string field = parent.empty() ? key : parent + "." + key;
    const auto it = obj.find(key);
    if (it == obj.end() || it->is_null()) fail(field, "missing key");
    return *it;
  }

  const Json& object(const Json& obj, const std::string& key, const std::string& parent) const {
    const Json& v = member(obj, key, parent);
    if (!v.is_object()) fail(join(parent, key), fmt::format("expected an object, found {}", v.type_name()));
    return v;
  }

  const Json& array(const Json& obj, const std::string& key, const std::string& parent) const {
    const Json& v = member(obj, key, parent);
    if (!v.is_array()) fail(join(parent, key), fmt::format("expected an array, found {}", v.type_name()));
    return v;
  }

  std::string string(const Json& obj, const std::string& key, const std::string& parent) const {
    const Json& v = member(obj, key, parent);
    if (!v.is_string()) fail(join(parent, key), fmt::format("expected a string, found {}", v.type_name()));
    return v.get<std::string>();
  }

  int64_t integer(const Json& obj, const std::string& key, const std::string& parent) const {
    return to_integer(member(obj, key, parent), join(parent, key));
  }

  int32_t integer32(const Json& obj, const std::string& key, const std::string& parent) const {
    return narrow(integer(obj, key, parent), join(parent, key));
  }

  int64_t to_integer(const Json& v, const std::string& field) const {
    if (!v.is_number_integer()) fail(field, fmt::format("expected an integer, found {}", describe(v)));
    if (v.is_number_unsigned() && v.get<uint64_t>() > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
      fail(field, "integer out of range");
    }
    return v.get<int64_t>();
  }

  int32_t narrow(int64_t v, const std::string& field) const {
    if (v < std::numeric_limits<int32_t>::min() || v > std::numeric_limits<int32_t>::max()) {
      fail(field, fmt::format("{} is out of range", v));
    }
    return static_cast<int32_t>(v);
  }

  static std::string join(const std::string& parent, const std::string& key) {
    return parent.empty() ? key : parent + "." + key;
  }

 private:
  static std::string describe(const Json& v) {
    return v.is_number_float() ? fmt::format("the number {}", v.dump()) : std::string(v.type_name());
  }

  const std::string& file_;
};

std::string at(const std::string& parent, size_t i) { return fmt::format("{}[{}]", parent, i); }

// Where each element of an op array sits: the timeline's `op_fields`, or the
// order files without it used.
struct OpLayout {
  size_t width = kOpFields;
  std::string names = "op, class, phase, microbatch, module, ready_ns, start_ns, end_ns";
  size_t op = 0, cls = 1, phase = 2, microbatch = 3, module = 4, ready = 5, start = 6, end = 7;
};

OpLayout parse_op_layout(const Reader& in, const Json& tl) {
  OpLayout l;
  const auto it = tl.find("op_fields");
  if (it == tl.end()) return l;
  if (!it->is_array()) in.fail("timeline.op_fields", fmt::format("expected an array, found {}", it->type_name()));
  std::map<std::string, size_t> at_index;
  for (size_t i = 0; i < it->size(); ++i) {
    const Json& name = (*it)[i];
    if (!name.is_string()) in.fail(at("timeline.op_fields", i), "expected a string");
    if (!at_index.emplace(name.get<std::string>(), i).second) {
      in.fail(at("timeline.op_fields", i), fmt::format("\"{}\" is listed twice", name.get<std::string>()));
    }
  }
  l.width = it->size();
  l.names.clear();
  for (const Json& name : *it) l.names += (l.names.empty() ? "" : ", ") + name.get<std::string>();
  const auto need = [&](const char* name) {
    const auto f = at_index.find(name);
    if (f == at_index.end()) {
      in.fail("timeline.op_fields", fmt::format("no \"{}\": diff needs op, class, phase, microbatch, module, ready_ns, "
                                                "start_ns and end_ns", name));
    }
    return f->second;
  };
  l.op = need("op");
  l.cls = need("class");
  l.phase = need("phase");
  l.microbatch = need("microbatch");
  l.module = need("module");
  l.ready = need("ready_ns");
  l.start = need("start_ns");
  l.end = need("end_ns");
  return l;
}

// A file that names its phases must name them as this lacuna does, or the
// phase numbers would be read as the wrong phases.
void check_phase_names(const Reader& in, const Json& tl) {
  const auto it = tl.find("phases");
  if (it == tl.end()) return;
  if (!it->is_array()) in.fail("timeline.phases", fmt::format("expected an array, found {}", it->type_name()));
  for (size_t i = 0; i < it->size(); ++i) {
    const Json& name = (*it)[i];
    const std::string ours = i < static_cast<size_t>(ir::Phase_ARRAYSIZE)
                                 ? std::string(phase_key(static_cast<ir::Phase>(i)))
                                 : std::string();
    if (!name.is_string() || name.get<std::string>() != ours) {
      in.fail(at("timeline.phases", i),
              fmt::format("phase {} is {} in this file but {} in this lacuna", i, name.dump(),
                          ours.empty() ? std::string("unknown") : "\"" + ours + "\""),
              "diff files written by the same lacuna version");
    }
  }
}

DiffOp parse_op(const Reader& in, const Json& v, const std::string& field, size_t num_classes, const OpLayout& l) {
  if (!v.is_array() || v.size() != l.width) {
    in.fail(field, fmt::format("expected [{}]", l.names));
  }
  const auto get = [&](size_t i) { return in.to_integer(v[i], at(field, i)); };
  DiffOp op;
  op.op = in.narrow(get(l.op), at(field, l.op));
  op.cls = in.narrow(get(l.cls), at(field, l.cls));
  op.phase = in.narrow(get(l.phase), at(field, l.phase));
  op.microbatch = in.narrow(get(l.microbatch), at(field, l.microbatch));
  op.module = in.narrow(get(l.module), at(field, l.module));
  op.ready_ns = get(l.ready);
  op.start_ns = get(l.start);
  op.end_ns = get(l.end);
  if (op.op < 0) in.fail(at(field, l.op), fmt::format("op index {} is negative", op.op));
  if (op.cls < 0 || static_cast<size_t>(op.cls) >= num_classes) {
    in.fail(at(field, l.cls), fmt::format("class {} is not an index into timeline.classes ({} classes)", op.cls, num_classes));
  }
  if (op.start_ns < 0 || op.end_ns < op.start_ns) {
    in.fail(field, fmt::format("the op ends before it starts or starts before 0 (start {} ns, end {} ns)", op.start_ns,
                               op.end_ns));
  }
  if (op.ready_ns > kMaxDiffTimeNs || op.end_ns > kMaxDiffTimeNs) {
    in.fail(field, fmt::format("a time above 10^15 ns (11.6 days), the longest lacuna writes (ready {} ns, end {} ns)",
                               op.ready_ns, op.end_ns));
  }
  return op;
}

DiffStream parse_stream(const Reader& in, const Json& v, const std::string& field, size_t num_classes,
                        const OpLayout& layout) {
  if (!v.is_object()) in.fail(field, "expected an object");
  DiffStream s;
  s.stream = in.integer32(v, "stream", field);
  s.name = in.string(v, "name", field);
  s.kind = in.string(v, "kind", field);
  const Json& ops = in.array(v, "ops", field);
  s.ops.reserve(ops.size());
  const std::string ops_field = field + ".ops";
  for (size_t i = 0; i < ops.size(); ++i) s.ops.push_back(parse_op(in, ops[i], at(ops_field, i), num_classes, layout));
  return s;
}

void parse_timeline(const Reader& in, const Json& doc, DiffInput& out) {
  const auto it = doc.find("timeline");
  if (it == doc.end() || it->is_null()) {
    in.fail("timeline",
            "no per-op timeline: this file was written by an older lacuna, or without the timeline",
            "write it again with `lacuna simulate` or `lacuna execute` and ‹json›, of this version");
  }
  if (!it->is_object()) in.fail("timeline", fmt::format("expected an object, found {}", it->type_name()));
  const Json& tl = *it;
  if (const auto n = tl.find("iterations"); n != tl.end() && !(n->is_number_integer() && n->get<int64_t>() == 1)) {
    in.fail("timeline.iterations", fmt::format("a timeline of {} iterations: lacuna diff compares one iteration", n->dump()),
            "write the prediction with `lacuna simulate` and ‹json›, without ‹iterations› (or ‹iterations 1›)");
  }
  const OpLayout layout = parse_op_layout(in, tl);
  check_phase_names(in, tl);
  const Json& classes = in.array(tl, "classes", "timeline");
  for (size_t i = 0; i < classes.size(); ++i) {
    if (!classes[i].is_string()) in.fail(at("timeline.classes", i), "expected a string");
    out.classes.push_back(classes[i].get<std::string>());
  }
  const Json& ranks = in.array(tl, "ranks", "timeline");
  std::set<int32_t> seen;
  int64_t busy_ns = 0;
  for (size_t r = 0; r < ranks.size(); ++r) {
    const std::string field = at("timeline.ranks", r);
    if (!ranks[r].is_object()) in.fail(field, "expected an object");
    DiffRank rank;
    rank.rank = in.integer32(ranks[r], "rank", field);
    if (!seen.insert(rank.rank).second) in.fail(field + ".rank", fmt::format("rank {} appears twice", rank.rank));
    rank.label = in.string(ranks[r], "label", field);
    const Json& streams = in.array(ranks[r], "streams", field);
    for (size_t s = 0; s < streams.size(); ++s) {
      rank.streams.push_back(parse_stream(in, streams[s], at(field + ".streams", s), out.classes.size(), layout));
      for (const DiffOp& op : rank.streams.back().ops) {
        busy_ns += op.end_ns - op.start_ns;  // ≤ 10^15 each: no overflow before the check
        if (busy_ns > kMaxDiffTotalNs) {
          in.fail(at(field + ".streams", s), "the ops' durations add up to more than 2^62 ns over the file");
        }
      }
    }
    out.ranks.push_back(std::move(rank));
  }
}

void parse_rank_bubbles(const Reader& in, const Json& doc, DiffInput& out) {
  const Json& ranks = in.array(doc, "ranks", "");
  int64_t bubble_ns = 0;
  for (size_t r = 0; r < ranks.size(); ++r) {
    const std::string field = at("ranks", r);
    if (!ranks[r].is_object()) in.fail(field, "expected an object");
    DiffRankBubbles b;
    b.rank = in.integer32(ranks[r], "rank", field);
    const Json& by_category = in.object(ranks[r], "bubble_s", field);
    for (auto c = by_category.begin(); c != by_category.end(); ++c) {
      if (!c->is_number()) in.fail(field + ".bubble_s." + c.key(), "expected a number of seconds");
      const double seconds = c->get<double>();
      if (!(seconds >= 0 && seconds <= 1e6)) {
        in.fail(field + ".bubble_s." + c.key(), fmt::format("{} s is not a bubble time in [0, 10^6] s", seconds));
      }
      b.by_category_ns.emplace_back(c.key(), TimeNs::from_seconds(seconds).count());
      bubble_ns += b.by_category_ns.back().second;
      if (bubble_ns > kMaxDiffTotalNs) in.fail(field + ".bubble_s", "the bubbles add up to more than 2^62 ns over the file");
    }
    out.rank_bubbles.push_back(std::move(b));
  }
}

}  // namespace

const DiffRank* DiffInput::find_rank(int32_t rank) const {
  const auto it = std::find_if(ranks.begin(), ranks.end(), [rank](const DiffRank& r) { return r.rank == rank; });
  return it == ranks.end() ? nullptr : &*it;
}

DiffInput parse_diff_input(std::string_view json_text, const std::string& file) {
  const Reader in(file);
  Json doc;
  if (starts_with_utf8_bom(json_text)) {
    in.fail({}, "the file starts with a UTF-8 byte-order mark (BOM)",
            "lacuna writes JSON without one; pass the file it wrote, or save it as UTF-8 without a BOM");
  }
  // A key given twice in one object would silently keep the last value;
  // refuse it, as the scenario reader does.
  std::vector<std::set<std::string>> keys_by_depth;
  const auto no_duplicate_keys = [&](int depth, Json::parse_event_t event, Json& parsed) {
    const auto d = static_cast<size_t>(depth);
    if (event == Json::parse_event_t::object_start) {
      if (keys_by_depth.size() <= d) keys_by_depth.resize(d + 1);
      keys_by_depth[d].clear();
    } else if (event == Json::parse_event_t::key) {
      // Keys are reported one level deeper than their object's start.
      const size_t level = d == 0 ? 0 : d - 1;
      if (keys_by_depth.size() <= level) keys_by_depth.resize(level + 1);
      const std::string key = parsed.get<std::string>();
      if (!keys_by_depth[level].insert(key).second) {
        in.fail({}, fmt::format("the key \"{}\" appears twice in one object", key), "keep one of them");
      }
    }
    return true;
  };
  try {
    doc = Json::parse(json_text, no_duplicate_keys);
  } catch (const Json::parse_error& e) {
    in.fail({}, fmt::format("not valid JSON ({})", e.what()),
            "pass the file written by `lacuna simulate` or `lacuna execute` with ‹json›");
  } catch (const Json::out_of_range& e) {
    // A number beyond double's range (1e999): bad input, not a bug.
    in.fail({}, fmt::format("a number is out of range ({})", e.what()),
            "pass the file written by `lacuna simulate` or `lacuna execute` with ‹json›");
  }
  if (!doc.is_object()) in.fail({}, fmt::format("expected a JSON object, found {}", doc.type_name()));
  DiffInput out;
  out.file = file;
  if (const auto d = doc.find("program_digest"); d != doc.end()) {
    if (!d->is_string()) in.fail("program_digest", fmt::format("expected a string, found {}", d->type_name()));
    out.program_digest = d->get<std::string>();
  }
  out.scenario = in.string(doc, "scenario", "");
  out.cost_model = doc.contains("cost_model") && doc["cost_model"].is_string() ? doc["cost_model"].get<std::string>() : "";
  out.mode = in.string(doc, "mode", "");
  out.num_gpus = in.integer(doc, "num_gpus", "");
  out.iteration_time_ns = in.integer(doc, "iteration_time_ns", "");
  if (out.iteration_time_ns < 0) in.fail("iteration_time_ns", "negative iteration time");
  if (out.iteration_time_ns > kMaxDiffTimeNs) {
    in.fail("iteration_time_ns", fmt::format("{} ns is above 10^15 ns (11.6 days), the longest lacuna writes",
                                             out.iteration_time_ns));
  }
  parse_rank_bubbles(in, doc, out);
  parse_timeline(in, doc, out);
  return out;
}

DiffInput parse_diff_file(std::string_view bytes, const std::string& file) {
  if (looks_like_span_trace(bytes)) return diff_input_from_trace(parse_span_trace(bytes, file), file);
  return parse_diff_input(bytes, file);
}

DiffInput load_diff_input(const std::string& path) { return parse_diff_file(read_input_file(path, kDiffInput), path); }

}  // namespace lacuna::report
