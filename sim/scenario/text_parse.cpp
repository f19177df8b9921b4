// Text format via protobuf's own parser; its ParseInfoTree gives the position of
// every field, which we flatten into dotted paths for SourceMap.
#include <google/protobuf/io/tokenizer.h>
#include <google/protobuf/text_format.h>

#include "sim/scenario/parse.h"

namespace lacuna::scenario {

namespace {

namespace pb = google::protobuf;

// Keeps the first error only: later ones are usually consequences of it.
class FirstError : public pb::io::ErrorCollector {
 public:
  void AddError(int line, pb::io::ColumnNumber column, const std::string& message) override {
    if (has_error) return;
    has_error = true;
    // protobuf counts lines and columns from 0.
    this->line = line + 1;
    this->column = column + 1;
    this->message = message;
  }
  bool has_error = false;
  int line = 0;
  int column = 0;
  std::string message;
};

std::string map_key_text(const pb::Message& entry) {
  const auto* key = entry.GetDescriptor()->map_key();
  const auto* refl = entry.GetReflection();
  if (key->cpp_type() == pb::FieldDescriptor::CPPTYPE_STRING) return refl->GetString(entry, key);
  return std::to_string(refl->GetInt64(entry, key));
}

void record(const pb::TextFormat::ParseInfoTree& tree, const pb::Message& msg, const std::string& prefix,
            SourceMap& out) {
  const auto* desc = msg.GetDescriptor();
  const auto* refl = msg.GetReflection();
  for (int f = 0; f < desc->field_count(); ++f) {
    const auto* field = desc->field(f);
    const std::string path = prefix.empty() ? field->name() : prefix + "." + field->name();
    if (!field->is_repeated()) {
      auto loc = tree.GetLocation(field, -1);
      if (loc.line < 0) continue;
      out.add(path, loc.line + 1, loc.column + 1);
      if (field->cpp_type() == pb::FieldDescriptor::CPPTYPE_MESSAGE) {
        if (const auto* sub = tree.GetTreeForNested(field, -1)) record(*sub, refl->GetMessage(msg, field), path, out);
      }
      continue;
    }
    const int size = refl->FieldSize(msg, field);
    for (int i = 0;; ++i) {
      auto loc = tree.GetLocation(field, i);
      if (loc.line < 0) break;
      if (i == 0) out.add(path, loc.line + 1, loc.column + 1);
      // A list written as `f: [1, 2, 3]` has one location for all values;
      // later elements are then located at the list.
      if (i >= size) break;
      if (field->is_map()) {
        // Straight after parsing, a map's entries are still in file order.
        const auto& entry = refl->GetRepeatedMessage(msg, field, i);
        const std::string entry_path = path + "[" + map_key_text(entry) + "]";
        out.add(entry_path, loc.line + 1, loc.column + 1);
        if (const auto* sub = tree.GetTreeForNested(field, i)) {
          const auto* value_field = field->message_type()->map_value();
          const auto* vsub = sub->GetTreeForNested(value_field, -1);
          if (value_field->cpp_type() == pb::FieldDescriptor::CPPTYPE_MESSAGE && vsub)
            record(*vsub, entry.GetReflection()->GetMessage(entry, value_field), entry_path, out);
        }
      } else {
        const std::string elem = path + "[" + std::to_string(i) + "]";
        out.add(elem, loc.line + 1, loc.column + 1);
        if (field->cpp_type() == pb::FieldDescriptor::CPPTYPE_MESSAGE) {
          if (const auto* sub = tree.GetTreeForNested(field, i))
            record(*sub, refl->GetRepeatedMessage(msg, field, i), elem, out);
        }
      }
    }
  }
}

}  // namespace

void parse_text_message(std::string_view text, pb::Message& message, SourceMap& locations, const std::string& hint) {
  FirstError errors;
  pb::TextFormat::ParseInfoTree tree;
  pb::TextFormat::Parser parser;
  parser.RecordErrorsTo(&errors);
  parser.WriteLocationsTo(&tree);
  const bool ok = parser.ParseFromString(std::string(text), &message);
  if (!ok || errors.has_error) {
    std::string what = errors.has_error ? errors.message : "cannot parse the file as protobuf text format";
    throw Error(SourceLocation{locations.file(), errors.line, errors.column, {}}, what, hint);
  }
  record(tree, message, "", locations);
}

Scenario parse_text_format(std::string_view text, SourceMap& locations) {
  Scenario spec;
  parse_text_message(text, spec, locations,
                     "see docs/scenario.md for the schema; fields and enum names are case-sensitive");
  return spec;
}

}  // namespace lacuna::scenario
