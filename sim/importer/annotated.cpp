#include "sim/importer/annotated.h"

#include <google/protobuf/descriptor.h>
#include <google/protobuf/message.h>

#include <fmt/format.h>

namespace lacuna::importer {

namespace {

namespace pb = google::protobuf;
using FD = pb::FieldDescriptor;

std::string quote(const std::string& s) {
  std::string out = "\"";
  for (char ch : s) {
    if (ch == '"' || ch == '\\') out += '\\';
    if (ch == '\n') {
      out += "\\n";
      continue;
    }
    out += ch;
  }
  return out + "\"";
}

std::string scalar(const pb::Message& m, const FD* f, int index) {
  const pb::Reflection* r = m.GetReflection();
  const bool rep = f->is_repeated();
  switch (f->cpp_type()) {
    case FD::CPPTYPE_INT32: return std::to_string(rep ? r->GetRepeatedInt32(m, f, index) : r->GetInt32(m, f));
    case FD::CPPTYPE_INT64: return std::to_string(rep ? r->GetRepeatedInt64(m, f, index) : r->GetInt64(m, f));
    case FD::CPPTYPE_UINT32: return std::to_string(rep ? r->GetRepeatedUInt32(m, f, index) : r->GetUInt32(m, f));
    case FD::CPPTYPE_UINT64: return std::to_string(rep ? r->GetRepeatedUInt64(m, f, index) : r->GetUInt64(m, f));
    // fmt's shortest round-trip form: 0.1 prints as 0.1, 1e-05 as 1e-05.
    case FD::CPPTYPE_DOUBLE: return fmt::format("{}", rep ? r->GetRepeatedDouble(m, f, index) : r->GetDouble(m, f));
    case FD::CPPTYPE_FLOAT: return fmt::format("{}", rep ? r->GetRepeatedFloat(m, f, index) : r->GetFloat(m, f));
    case FD::CPPTYPE_BOOL: return (rep ? r->GetRepeatedBool(m, f, index) : r->GetBool(m, f)) ? "true" : "false";
    case FD::CPPTYPE_ENUM: return std::string((rep ? r->GetRepeatedEnum(m, f, index) : r->GetEnum(m, f))->name());
    case FD::CPPTYPE_STRING: return quote(rep ? r->GetRepeatedString(m, f, index) : r->GetString(m, f));
    case FD::CPPTYPE_MESSAGE: break;
  }
  return {};
}

void notes(const Annotated& a, const std::string& path, const std::string& pad, std::string& out) {
  auto it = a.note.find(path);
  if (it == a.note.end()) return;
  for (const std::string& line : it->second) out += pad + "# " + line + "\n";
}

void line(const Annotated& a, const std::string& path, const std::string& pad, const std::string& text,
          std::string& out) {
  notes(a, path, pad, out);
  out += pad + text;
  auto it = a.source.find(path);
  if (it != a.source.end()) out += "  # " + it->second;
  out += "\n";
}

void print(const Annotated& a, const pb::Message& m, const std::string& prefix, int depth, std::string& out) {
  const pb::Reflection* r = m.GetReflection();
  std::vector<const FD*> fields;
  r->ListFields(m, &fields);  // in field-number order
  const std::string pad(static_cast<size_t>(depth) * 2, ' ');
  for (const FD* f : fields) {
    const std::string name(f->name());
    const std::string path = prefix.empty() ? name : prefix + "." + name;
    if (f->is_map()) continue;  // importers set no map field
    if (f->is_repeated()) {
      for (int i = 0; i < r->FieldSize(m, f); ++i) {
        const std::string elem = path + "[" + std::to_string(i) + "]";
        if (f->cpp_type() == FD::CPPTYPE_MESSAGE) {
          line(a, elem, pad, name + " {", out);
          print(a, r->GetRepeatedMessage(m, f, i), elem, depth + 1, out);
          out += pad + "}\n";
        } else {
          line(a, elem, pad, name + ": " + scalar(m, f, i), out);
        }
      }
      continue;
    }
    if (f->cpp_type() == FD::CPPTYPE_MESSAGE) {
      if (depth == 0) out += "\n";
      line(a, path, pad, name + " {", out);
      print(a, r->GetMessage(m, f), path, depth + 1, out);
      out += pad + "}\n";
      continue;
    }
    line(a, path, pad, name + ": " + scalar(m, f, -1), out);
  }
}

}  // namespace

std::string write_annotated(const Annotated& a) {
  std::string out;
  for (const std::string& h : a.header) out += h.empty() ? "#\n" : "# " + h + "\n";
  print(a, a.spec, "", 0, out);
  return out;
}

}  // namespace lacuna::importer
