// Text fields (docs/reliability.md#inputs): every string of the scenario is
// valid UTF-8, whatever set it (a file's escapes such as "\377", a --set
// edit, an importer), and the name, which becomes file names and CSV and
// JSON fields, is of a size those take. Protobuf refuses to serialize a
// string that is not UTF-8 and JSON writers throw on it, so an unchecked one
// surfaced as an internal error after the run.
#include <google/protobuf/descriptor.h>
#include <google/protobuf/reflection.h>

#include "sim/scenario/checks.h"
#include "sim/scenario/parse.h"

namespace lacuna::scenario {
namespace {

using google::protobuf::FieldDescriptor;
using google::protobuf::Message;

// The name ends up in every default file name (DIR/<name>.trace.json: most
// file systems stop at 255 bytes a name) and in CSV and JSON fields.
constexpr size_t kMaxNameBytes = 200;

void check_strings(const Message& m, const std::string& prefix, const Checker& c) {
  const google::protobuf::Reflection* r = m.GetReflection();
  std::vector<const FieldDescriptor*> fields;
  r->ListFields(m, &fields);
  for (const FieldDescriptor* f : fields) {
    const std::string path = prefix + std::string(f->name());
    const auto check = [&](const std::string& value, const std::string& at) {
      if (const size_t bad = first_invalid_utf8(value); bad != std::string::npos)
        c.fail(at, "is not valid UTF-8 text (byte " + std::to_string(bad) + " of the value)",
               "write the text as UTF-8 (escapes such as \\377 make raw bytes)");
    };
    if (f->cpp_type() == FieldDescriptor::CPPTYPE_STRING && f->type() == FieldDescriptor::TYPE_STRING) {
      if (f->is_repeated()) {
        for (int i = 0; i < r->FieldSize(m, f); ++i)
          check(r->GetRepeatedString(m, f, i), path + "[" + std::to_string(i) + "]");
      } else {
        check(r->GetString(m, f), path);
      }
    } else if (f->cpp_type() == FieldDescriptor::CPPTYPE_MESSAGE) {
      if (f->is_repeated()) {
        for (int i = 0; i < r->FieldSize(m, f); ++i)
          check_strings(r->GetRepeatedMessage(m, f, i), path + "[" + std::to_string(i) + "].", c);
      } else {
        check_strings(r->GetMessage(m, f), path + ".", c);
      }
    }
  }
}

}  // namespace

void validate_text(const Scenario& spec, const Checker& c) {
  check_strings(spec, "", c);
  if (spec.name().size() > kMaxNameBytes)
    c.fail("name",
           "is " + std::to_string(spec.name().size()) + " bytes long; a name may have at most " +
               std::to_string(kMaxNameBytes) + " (it names the output files)",
           "shorten it");
}

}  // namespace lacuna::scenario
