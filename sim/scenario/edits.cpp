#include "sim/scenario/edits.h"

#include <cerrno>

#include <google/protobuf/descriptor.h>
#include <google/protobuf/io/tokenizer.h>
#include <google/protobuf/reflection.h>
#include <google/protobuf/text_format.h>

#include <cstdlib>

#include "sim/core/option_text.h"

namespace lacuna::scenario {
namespace {

using google::protobuf::Descriptor;
using google::protobuf::FieldDescriptor;
using google::protobuf::Message;
using google::protobuf::Reflection;

[[noreturn]] void fail(const std::string& flag, const std::string& field, const std::string& what,
                       const std::string& fix) {
  throw Error(SourceLocation{flag, 0, 0, field}, what, fix);
}

std::string field_names(const Descriptor& d) {
  std::string out;
  for (int i = 0; i < d.field_count(); ++i) out += (i == 0 ? "" : ", ") + std::string(d.field(i)->name());
  return out;
}

// Collects the text-format parser's first error.
class FirstEditError : public google::protobuf::io::ErrorCollector {
 public:
  void AddError(int /*line*/, int /*column*/, const std::string& message) override {
    if (error.empty()) error = message;
  }
  void AddWarning(int, int, const std::string&) override {}
  std::string error;
};

void parse_value(Message& m, const FieldDescriptor& f, const std::string& value, const std::string& flag,
                 const std::string& path) {
  google::protobuf::TextFormat::Parser parser;
  FirstEditError errors;
  parser.RecordErrorsTo(&errors);
  if (!parser.ParseFieldValueFromString(value, &f, &m)) {
    std::string expected;
    switch (f.cpp_type()) {
      case FieldDescriptor::CPPTYPE_MESSAGE: expected = "a message in text format, e.g. {field: value}"; break;
      case FieldDescriptor::CPPTYPE_ENUM: {
        const auto* e = f.enum_type();
        for (int i = 0; i < e->value_count(); ++i) expected += (i == 0 ? "one of " : ", ") + std::string(e->value(i)->name());
        break;
      }
      case FieldDescriptor::CPPTYPE_BOOL: expected = "true or false"; break;
      case FieldDescriptor::CPPTYPE_STRING: expected = "a string (quote it if it has spaces)"; break;
      case FieldDescriptor::CPPTYPE_FLOAT:
      case FieldDescriptor::CPPTYPE_DOUBLE: expected = "a number"; break;
      default: expected = "an integer"; break;
    }
    fail(flag, path, "cannot read \"" + abbreviate(value) + "\"" + (errors.error.empty() ? "" : ": " + abbreviate(errors.error, 200)),
         "give " + expected);
  }
}

// Splits "a,b,{c, d},e" at top-level commas.
std::vector<std::string> split_list(const std::string& s) {
  std::vector<std::string> out;
  int depth = 0;
  bool quoted = false;
  std::string cur;
  for (char ch : s) {
    if (ch == '"') quoted = !quoted;
    if (!quoted && (ch == '{' || ch == '[' || ch == '<')) ++depth;
    if (!quoted && (ch == '}' || ch == ']' || ch == '>')) --depth;
    if (ch == ',' && depth == 0 && !quoted) {
      out.push_back(cur);
      cur.clear();
    } else {
      cur += ch;
    }
  }
  out.push_back(cur);
  return out;
}

struct Segment {
  std::string name;
  bool has_subscript = false;
  std::string subscript;  // index or map key
};

std::vector<Segment> parse_path(const std::string& path, const std::string& flag) {
  std::vector<Segment> out;
  size_t i = 0;
  while (i < path.size()) {
    Segment seg;
    while (i < path.size() && path[i] != '.' && path[i] != '[') seg.name += path[i++];
    if (i < path.size() && path[i] == '[') {
      const size_t close = path.find(']', i);
      if (close == std::string::npos) fail(flag, path, "unclosed [ in the field path", "write e.g. tiers[1].children");
      seg.has_subscript = true;
      seg.subscript = path.substr(i + 1, close - i - 1);
      i = close + 1;
    }
    if (seg.name.empty()) fail(flag, path, "empty field name in the path", "write a dotted path such as parallel.dp");
    out.push_back(seg);
    if (i < path.size()) {
      if (path[i] != '.') fail(flag, path, "expected '.' after ']'", "write e.g. tiers[1].children");
      ++i;
      if (i == path.size()) fail(flag, path, "the path ends with '.'", "name a field after the dot");
    }
  }
  if (out.empty()) fail(flag, path, "no field named", "write FIELD=VALUE, e.g. parallel.dp=64");
  return out;
}

int index_of(const Segment& seg, int size, bool allow_append, const std::string& flag, const std::string& path) {
  char* end = nullptr;
  const long v = std::strtol(seg.subscript.c_str(), &end, 10);
  if (seg.subscript.empty() || *end != '\0' || v < 0 || v > size - (allow_append ? 0 : 1)) {
    fail(flag, path,
         seg.name + " has " + std::to_string(size) + " entries; [" + seg.subscript + "] is not one of them",
         allow_append ? "use an index in [0, " + std::to_string(size) + "] (" + std::to_string(size) + " appends)"
                      : "use an index in [0, " + std::to_string(size) + ")");
  }
  return static_cast<int>(v);
}

// The map entry of `key` in map field `f` of `m`, added if absent.
Message* map_entry(Message& m, const FieldDescriptor& f, const std::string& key, const std::string& flag,
                   const std::string& path) {
  const Reflection& r = *m.GetReflection();
  const FieldDescriptor* key_field = f.message_type()->map_key();
  if (key_field->cpp_type() != FieldDescriptor::CPPTYPE_STRING) {
    fail(flag, path, "only maps with string keys can be edited", "edit the whole field");
  }
  for (int i = 0; i < r.FieldSize(m, &f); ++i) {
    Message* entry = r.MutableRepeatedMessage(&m, &f, i);
    if (entry->GetReflection()->GetString(*entry, key_field) == key) return entry;
  }
  Message* entry = r.AddMessage(&m, &f);
  entry->GetReflection()->SetString(entry, key_field, key);
  return entry;
}

}  // namespace

std::string set_field(Message& message, const std::string& assignment, const std::string& flag) {
  const size_t eq = assignment.find('=');
  if (eq == std::string::npos) fail(flag, "", "expected FIELD=VALUE", "write e.g. ‹set parallel.dp=64›");
  const std::string path = assignment.substr(0, eq);
  const std::string value = assignment.substr(eq + 1);
  const std::vector<Segment> segs = parse_path(path, flag);
  Message* m = &message;
  std::string canonical;
  for (size_t k = 0; k < segs.size(); ++k) {
    const Segment& seg = segs[k];
    const bool last = k + 1 == segs.size();
    const Descriptor& d = *m->GetDescriptor();
    const FieldDescriptor* f = d.FindFieldByName(seg.name);
    canonical += (canonical.empty() ? "" : ".") + seg.name;
    if (f == nullptr) {
      fail(flag, canonical, d.name() + " has no field \"" + seg.name + "\"", "fields of " + d.name() + ": " + field_names(d));
    }
    const Reflection& r = *m->GetReflection();
    if (seg.has_subscript && !f->is_repeated()) {
      fail(flag, canonical, seg.name + " is not a repeated field or a map; it takes no [" + seg.subscript + "]",
           "drop the subscript");
    }
    if (f->is_map()) {
      if (!seg.has_subscript) {
        if (!last) fail(flag, canonical, seg.name + " is a map: name an entry", "write e.g. " + seg.name + "[GEMM]");
        r.ClearField(m, f);
        for (const std::string& item : split_list(value)) parse_value(*m, *f, item, flag, canonical);
        return canonical;
      }
      canonical += "[" + seg.subscript + "]";
      Message* entry = map_entry(*m, *f, seg.subscript, flag, canonical);
      const FieldDescriptor* vf = f->message_type()->map_value();
      if (last) {
        entry->GetReflection()->ClearField(entry, vf);
        parse_value(*entry, *vf, value, flag, canonical);
        return canonical;
      }
      if (vf->cpp_type() != FieldDescriptor::CPPTYPE_MESSAGE) {
        fail(flag, canonical, "the entries of " + seg.name + " are not messages", "end the path at the entry");
      }
      m = entry->GetReflection()->MutableMessage(entry, vf);
      continue;
    }
    if (f->is_repeated()) {
      const int size = r.FieldSize(*m, f);
      if (!seg.has_subscript) {
        if (!last) {
          fail(flag, canonical, seg.name + " is repeated: name an entry", "write e.g. " + seg.name + "[0]");
        }
        // The whole list: FIELD=a,b,c (an empty VALUE clears it).
        r.ClearField(m, f);
        if (!value.empty()) {
          for (const std::string& item : split_list(value)) parse_value(*m, *f, item, flag, canonical);
        }
        return canonical;
      }
      const int i = index_of(seg, size, true, flag, canonical);
      canonical += "[" + std::to_string(i) + "]";
      if (last) {
        // Append, then move it into place: works for every element type.
        parse_value(*m, *f, value, flag, canonical);
        if (i < size) {
          r.SwapElements(m, f, i, size);
          r.RemoveLast(m, f);
        }
        return canonical;
      }
      if (f->cpp_type() != FieldDescriptor::CPPTYPE_MESSAGE) {
        fail(flag, canonical, seg.name + " holds values, not messages", "end the path at " + canonical);
      }
      m = i == size ? r.AddMessage(m, f) : r.MutableRepeatedMessage(m, f, i);
      continue;
    }
    if (last) {
      r.ClearField(m, f);
      parse_value(*m, *f, value, flag, canonical);
      return canonical;
    }
    if (f->cpp_type() != FieldDescriptor::CPPTYPE_MESSAGE) {
      fail(flag, canonical, seg.name + " is a value, not a message: it has no field \"" + segs[k + 1].name + "\"",
           "end the path at " + canonical);
    }
    m = r.MutableMessage(m, f);
  }
  return canonical;
}

namespace {

double parse_number(const std::string& text, const std::string& flag, const std::string& what) {
  char* end = nullptr;
  const double v = std::strtod(text.c_str(), &end);
  if (text.empty() || *end != '\0') fail(flag, "", "\"" + text + "\" is not a number (" + what + ")", "");
  return v;
}

int64_t parse_int(const std::string& text, const std::string& flag, const std::string& what) {
  char* end = nullptr;
  errno = 0;
  const long long v = std::strtoll(text.c_str(), &end, 10);
  if (text.empty() || *end != '\0') fail(flag, "", "\"" + text + "\" is not an integer (" + what + ")", "");
  if (errno == ERANGE) fail(flag, "", "\"" + text + "\" is out of range (" + what + ")", "");
  return v;
}

void add_straggler(Variability& v, const std::string& spec, SourceMap& locations) {
  const std::string flag = option_ref("straggler", spec);
  const std::string fix = "write host=NODE:FACTOR, e.g. ‹straggler host=17:1.10› (node 17's compute 10 % slower)";
  const size_t colon = spec.rfind(':');
  const size_t eq = spec.find('=');
  if (colon == std::string::npos || eq == std::string::npos || eq > colon) fail(flag, "", "expected host=NODE:FACTOR", fix);
  const std::string key = spec.substr(0, eq);
  if (key != "host" && key != "node") fail(flag, "", "unknown key \"" + key + "\"", fix);
  StragglerHost* h = v.mutable_stragglers()->add_hosts();
  h->set_node(parse_int(spec.substr(eq + 1, colon - eq - 1), flag, "the node"));
  h->set_factor(parse_number(spec.substr(colon + 1), flag, "the compute-time factor"));
  locations.set_origin("variability.stragglers.hosts[" + std::to_string(v.stragglers().hosts_size() - 1) + "]", flag);
}

void add_slow_link(Variability& v, const std::string& spec, SourceMap& locations) {
  const std::string flag = option_ref("slow-link", spec);
  const std::string fix =
      "write node=N,nic=K[,dir=up|down]:FACTOR or node=N,gpu=G[,dir=up|down]:FACTOR (NVLink), e.g. "
      "‹slow-link node=12,nic=3:0.5›";
  const size_t colon = spec.rfind(':');
  if (colon == std::string::npos) fail(flag, "", "expected a bandwidth factor after ':'", fix);
  SlowLink l;
  bool have_node = false;
  for (const std::string& part : split_list(spec.substr(0, colon))) {
    const size_t eq = part.find('=');
    if (eq == std::string::npos) fail(flag, "", "expected KEY=VALUE, got \"" + part + "\"", fix);
    const std::string key = part.substr(0, eq);
    const std::string val = part.substr(eq + 1);
    if (key == "node" || key == "host") {
      l.set_node(parse_int(val, flag, "the node"));
      have_node = true;
    } else if (key == "nic" || key == "gpu") {
      if (l.port() != PORT_UNSPECIFIED) fail(flag, "", "give one of nic= and gpu=", fix);
      l.set_port(key == "nic" ? PORT_NIC : PORT_NVLINK);
      l.set_index(parse_int(val, flag, key == "nic" ? "the NIC" : "the GPU"));
    } else if (key == "dir") {
      if (val == "up") {
        l.set_direction(LINK_UP);
      } else if (val == "down") {
        l.set_direction(LINK_DOWN);
      } else if (val == "both") {
        l.set_direction(LINK_BOTH);
      } else {
        fail(flag, "", "dir must be up, down or both, got \"" + val + "\"", fix);
      }
    } else {
      fail(flag, "", "unknown key \"" + key + "\"", fix);
    }
  }
  if (!have_node) fail(flag, "", "no node= given", fix);
  if (l.port() == PORT_UNSPECIFIED) fail(flag, "", "no nic= or gpu= given", fix);
  l.set_bandwidth_factor(parse_number(spec.substr(colon + 1), flag, "the bandwidth factor"));
  *v.add_slow_links() = l;
  locations.set_origin("variability.slow_links[" + std::to_string(v.slow_links_size() - 1) + "]", flag);
}

void apply_variability_flags(Variability& v, const ScenarioEdits& e, SourceMap& locations) {
  if (e.seed >= 0) {
    v.set_seed(e.seed);
    locations.set_origin("variability.seed", option_ref("seed", std::to_string(e.seed)));
  }
  for (const std::string& s : e.stragglers) add_straggler(v, s, locations);
  for (const std::string& s : e.slow_links) add_slow_link(v, s, locations);
}

}  // namespace

void apply_edits(Scenario& raw, const ScenarioEdits& e, SourceMap& locations) {
  if (e.ideal) {
    raw.clear_variability();
    raw.mutable_variability()->set_ideal(true);
    locations.set_origin("variability", "‹ideal›");
  }
  for (const std::string& a : e.set) {
    const std::string flag = option_ref("set", a);
    locations.set_origin(set_field(raw, a, flag), flag);
  }
  apply_variability_flags(*raw.mutable_variability(), e, locations);
}

void apply_variability_edits(Variability& v, const ScenarioEdits& e, SourceMap& locations) {
  if (!e.set.empty()) {
    throw Error(SourceLocation{option_ref("set", e.set.front()), 0, 0, {}},
                "‹set› edits scenarios; this is a compiled program",
                "pass the scenario itself, or compile it with the edit");
  }
  if (e.ideal) {
    v.Clear();
    v.set_ideal(true);
    locations.set_origin("variability", "‹ideal›");
  }
  apply_variability_flags(v, e, locations);
}

}  // namespace lacuna::scenario
