// A scenario being imported, with where each field came from: the importers
// (hf_import.h, megatron_import.h) fill it, write_annotated() prints it as a
// .pbtxt scenario with a comment beside every field ("# config.json:
// num_hidden_layers", "# --num-layers", "# default: ...").
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "sim/proto/scenario.pb.h"

namespace lacuna::importer {

struct Annotated {
  scenario::Scenario spec;
  // Field path ("model.llm.num_layers", "model.encoders[0].transformer.hidden_size")
  // → where its value came from; printed after the field.
  std::map<std::string, std::string> source;
  // Field path → comment lines printed above the field or block (what is
  // approximated, what could not be mapped).
  std::map<std::string, std::vector<std::string>> note;
  // Lines of the file's header comment.
  std::vector<std::string> header;
  // Problems the user should see on stderr too (unmapped flags or keys).
  std::vector<std::string> warnings;

  // Records a value's source; `path` must name a field set in `spec`.
  void from(const std::string& path, const std::string& where) { source[path] = where; }
  void add_note(const std::string& path, const std::string& line) { note[path].push_back(line); }
};

// The .pbtxt text of `a.spec` with its comments; every field set in the
// message is printed (proto3 zero scalars are not: they are unset).
std::string write_annotated(const Annotated& a);

}  // namespace lacuna::importer
