#include "sim/importer/json_config.h"

#include <google/protobuf/util/json_util.h>

#include <cmath>
#include <algorithm>
#include <filesystem>

#include "sim/core/error.h"

namespace lacuna::importer {

namespace pb = google::protobuf;

JsonConfig::JsonConfig(std::shared_ptr<const pb::Struct> root, const pb::Struct* node, std::string file,
                       std::string prefix)
    : root_(std::move(root)), node_(node), file_(std::move(file)), prefix_(std::move(prefix)) {}

namespace {

// Hugging Face configs nest a few levels (text_config.rope_scaling...). The
// JSON parser below takes quadratic time on deep arrays (100,000 levels ran
// for over a minute), so depth is bounded first, by a scan that skips strings.
constexpr int kMaxJsonDepth = 64;

void check_depth(std::string_view text, const std::string& file) {
  int depth = 0, line = 1, column = 0;
  bool in_string = false, escaped = false;
  for (const char ch : text) {
    ++column;
    if (ch == '\n') {
      ++line;
      column = 0;
    }
    if (in_string) {
      if (escaped) escaped = false;
      else if (ch == '\\') escaped = true;
      else if (ch == '"') in_string = false;
      continue;
    }
    if (ch == '"') in_string = true;
    else if (ch == '{' || ch == '[') {
      if (++depth > kMaxJsonDepth)
        throw Error(SourceLocation{file, line, column, {}},
                    "the JSON nests deeper than " + std::to_string(kMaxJsonDepth) + " levels",
                    "pass the model's config.json as downloaded from the Hugging Face Hub");
    } else if (ch == '}' || ch == ']') {
      --depth;
    }
  }
}

}  // namespace

JsonConfig JsonConfig::parse(std::string_view text, const std::string& file) {
  check_depth(text, file);
  auto root = std::make_shared<pb::Struct>();
  pb::util::JsonParseOptions options;
  const auto status = pb::util::JsonStringToMessage(std::string(text), root.get(), options);
  if (!status.ok())
    throw Error(SourceLocation{file, 0, 0, {}},
                "not a JSON object: " + std::string(status.message()),
                "pass the model's config.json as downloaded from the Hugging Face Hub");
  const pb::Struct* node = root.get();
  return JsonConfig(std::move(root), node, file, "");
}

std::string JsonConfig::where(const std::string& key) const {
  return std::filesystem::path(file_).filename().string() + ": " + prefix_ + key;
}

const pb::Value* JsonConfig::get(const std::string& key) const {
  read_->insert(key);
  auto it = node_->fields().find(key);
  if (it == node_->fields().end() || it->second.kind_case() == pb::Value::kNullValue) return nullptr;
  return &it->second;
}

void JsonConfig::wrong_type(const std::string& key, const char* want) const {
  throw Error(SourceLocation{file_, 0, 0, prefix_ + key}, std::string("must be ") + want,
              "check the config.json; lacuna reads the Hugging Face transformers field of this name");
}

std::optional<JsonConfig> JsonConfig::object(const std::string& key) const {
  const pb::Value* v = get(key);
  if (!v || !v->has_struct_value()) return std::nullopt;
  JsonConfig sub(root_, &v->struct_value(), file_, prefix_ + key + ".");
  return sub;
}

bool JsonConfig::has(const std::string& key) const {
  read_->insert(key);
  auto it = node_->fields().find(key);
  return it != node_->fields().end() && it->second.kind_case() != pb::Value::kNullValue;
}

std::optional<int64_t> JsonConfig::integer(const std::string& key) const {
  const pb::Value* v = get(key);
  if (!v) return std::nullopt;
  // JSON numbers arrive as doubles: exact for integers below 2^53.
  if (!v->has_number_value() || v->number_value() != std::floor(v->number_value()) ||
      std::fabs(v->number_value()) > 9.0e15)
    wrong_type(key, "an integer");
  return static_cast<int64_t>(v->number_value());
}

std::optional<double> JsonConfig::number(const std::string& key) const {
  const pb::Value* v = get(key);
  if (!v) return std::nullopt;
  if (!v->has_number_value()) wrong_type(key, "a number");
  return v->number_value();
}

std::optional<bool> JsonConfig::boolean(const std::string& key) const {
  const pb::Value* v = get(key);
  if (!v) return std::nullopt;
  if (!v->has_bool_value()) wrong_type(key, "true or false");
  return v->bool_value();
}

std::optional<std::string> JsonConfig::string(const std::string& key) const {
  const pb::Value* v = get(key);
  if (!v) return std::nullopt;
  if (!v->has_string_value()) wrong_type(key, "a string");
  return v->string_value();
}

std::vector<std::string> JsonConfig::strings(const std::string& key) const {
  std::vector<std::string> out;
  const pb::Value* v = get(key);
  if (!v) return out;
  if (v->has_string_value()) return {v->string_value()};
  if (!v->has_list_value()) wrong_type(key, "a list of strings");
  for (const auto& e : v->list_value().values()) {
    if (!e.has_string_value()) wrong_type(key, "a list of strings");
    out.push_back(e.string_value());
  }
  return out;
}

std::vector<int64_t> JsonConfig::integers(const std::string& key) const {
  std::vector<int64_t> out;
  const pb::Value* v = get(key);
  if (!v) return out;
  if (!v->has_list_value()) wrong_type(key, "a list of integers");
  for (const auto& e : v->list_value().values()) {
    if (!e.has_number_value() || e.number_value() != std::floor(e.number_value()))
      wrong_type(key, "a list of integers");
    out.push_back(static_cast<int64_t>(e.number_value()));
  }
  return out;
}

std::vector<std::string> JsonConfig::keys() const {
  std::vector<std::string> out;
  for (const auto& [key, value] : node_->fields())
    if (value.kind_case() != pb::Value::kNullValue) out.push_back(key);
  std::sort(out.begin(), out.end());
  return out;
}

std::vector<std::string> JsonConfig::unread() const {
  std::vector<std::string> out;
  for (const auto& [key, value] : node_->fields())
    if (!read_->count(key) && value.kind_case() != pb::Value::kNullValue) out.push_back(key);
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace lacuna::importer
