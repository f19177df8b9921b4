// Text-format profiles: parsed by the scenario loader's text parser, which
// records every field's line in a SourceMap so that validation errors point
// at the offending field. Writing uses protobuf's
// printer, with leaf messages (one measurement, one collective point) on one
// line each so that a profile of thousands of points stays readable.
#include "sim/calibration/profile_io.h"

#include <fstream>
#include <sstream>

#include <fmt/format.h>
#include <google/protobuf/io/tokenizer.h>
#include <google/protobuf/text_format.h>

#include "sim/core/atomic_file.h"
#include "sim/core/error.h"
#include "sim/core/input_file.h"
#include "sim/scenario/parse.h"

namespace lacuna::calibration {
namespace {

namespace pb = google::protobuf;

calib::CalibrationProfile parse_with_locations(std::string_view text, scenario::SourceMap& locations) {
  scenario::check_utf8(text, locations);
  calib::CalibrationProfile profile;
  scenario::parse_text_message(text, profile, locations,
                               "a calibration profile is lacuna.calib.CalibrationProfile in protobuf text format "
                               "(sim/proto/calibration.proto), as written by `lacuna calibrate`");
  return profile;
}

// ---------------------------------------------------------------- writing

bool all_scalar(const pb::Descriptor* d) {
  for (int f = 0; f < d->field_count(); ++f) {
    if (d->field(f)->cpp_type() == pb::FieldDescriptor::CPPTYPE_MESSAGE) return false;
  }
  return true;
}

std::string scalar_text(const pb::Message& m, const pb::FieldDescriptor* field, int index) {
  const auto* r = m.GetReflection();
  const bool rep = index >= 0;
  switch (field->cpp_type()) {
    case pb::FieldDescriptor::CPPTYPE_INT32:
      return std::to_string(rep ? r->GetRepeatedInt32(m, field, index) : r->GetInt32(m, field));
    case pb::FieldDescriptor::CPPTYPE_INT64:
      return std::to_string(rep ? r->GetRepeatedInt64(m, field, index) : r->GetInt64(m, field));
    case pb::FieldDescriptor::CPPTYPE_DOUBLE:
      // Shortest text that reads back as the same double.
      return fmt::format("{}", rep ? r->GetRepeatedDouble(m, field, index) : r->GetDouble(m, field));
    default: {
      std::string out;
      pb::TextFormat::PrintFieldValueToString(m, field, index, &out);
      return out;
    }
  }
}

// A message of scalars only goes on one line: `points { shape: [8, 4096] time_ns: 1200 ... }`.
class CompactLeaves : public pb::TextFormat::FastFieldValuePrinter {
 public:
  void PrintMessageStart(const pb::Message& message, int field_index, int field_count, bool single_line_mode,
                         pb::TextFormat::BaseTextGenerator* generator) const override {
    if (!all_scalar(message.GetDescriptor())) {
      FastFieldValuePrinter::PrintMessageStart(message, field_index, field_count, single_line_mode, generator);
      return;
    }
    generator->PrintLiteral(" { ");
  }
  bool PrintMessageContent(const pb::Message& message, int, int, bool, pb::TextFormat::BaseTextGenerator* generator) const override {
    if (!all_scalar(message.GetDescriptor())) return false;
    const auto* r = message.GetReflection();
    std::vector<const pb::FieldDescriptor*> fields;
    r->ListFields(message, &fields);  // set fields, in field-number order
    for (const auto* field : fields) {
      std::string text = field->name() + ": ";
      if (field->is_repeated()) {
        text += "[";
        for (int i = 0; i < r->FieldSize(message, field); ++i) text += (i ? ", " : "") + scalar_text(message, field, i);
        text += "]";
      } else {
        text += scalar_text(message, field, -1);
      }
      text += " ";
      generator->PrintString(text);
    }
    return true;
  }
  void PrintMessageEnd(const pb::Message& message, int field_index, int field_count, bool single_line_mode,
                       pb::TextFormat::BaseTextGenerator* generator) const override {
    if (!all_scalar(message.GetDescriptor())) {
      FastFieldValuePrinter::PrintMessageEnd(message, field_index, field_count, single_line_mode, generator);
      return;
    }
    generator->PrintLiteral("}\n");
  }
};

}  // namespace

calib::CalibrationProfile parse_profile(std::string_view text, const std::string& display_name) {
  scenario::SourceMap locations;
  locations.set_file(display_name);
  calib::CalibrationProfile profile = parse_with_locations(text, locations);
  validate_profile(profile, locations);
  return profile;
}

calib::CalibrationProfile read_profile(const std::string& path) {
  return parse_profile(read_input_file(path, kProfileInput), path);
}

std::string format_profile(const calib::CalibrationProfile& profile) {
  pb::TextFormat::Printer printer;
  printer.SetDefaultFieldValuePrinter(new CompactLeaves());  // the printer takes ownership
  std::string body;
  if (!printer.PrintToString(profile, &body)) throw Error("cannot print the calibration profile");
  std::string out;
  out += "# lacuna calibration profile (lacuna.calib.CalibrationProfile, sim/proto/calibration.proto)\n";
  out += fmt::format("# device: {}; {} kernel tables, {} collective fits\n", profile.device().name(),
                     profile.ops_size(), profile.collectives_size());
  out += "# Use: lacuna simulate SCENARIO --calibration THIS_FILE\n";
  out += body;
  return out;
}

void write_profile(const calib::CalibrationProfile& profile, const std::string& path) {
  scenario::SourceMap none;
  none.set_file(path);
  validate_profile(profile, none);
  write_file_atomically(path, format_profile(profile));
}

}  // namespace lacuna::calibration
