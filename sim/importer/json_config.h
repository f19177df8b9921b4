// A Hugging Face config.json as a read-only tree (protobuf's Struct through
// its JSON util: no new dependency), remembering which keys the importer read
// so that it can say which ones it left unmapped.
#pragma once

#include <google/protobuf/struct.pb.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

namespace lacuna::importer {

class JsonConfig {
 public:
  // Throws lacuna::Error naming `file` when the text is not a JSON object.
  static JsonConfig parse(std::string_view text, const std::string& file);

  // A nested object ("vision_config", "text_config"): `prefix` names it in
  // messages ("vision_config."). Null when absent or not an object.
  std::optional<JsonConfig> object(const std::string& key) const;

  bool has(const std::string& key) const;  // present and not null (counts as read)
  // Throw lacuna::Error naming the file and key when present with another type.
  std::optional<int64_t> integer(const std::string& key) const;
  std::optional<double> number(const std::string& key) const;
  std::optional<bool> boolean(const std::string& key) const;
  std::optional<std::string> string(const std::string& key) const;
  // A list of strings ("architectures") or integers ("mlp_only_layers").
  std::vector<std::string> strings(const std::string& key) const;
  std::vector<int64_t> integers(const std::string& key) const;

  // Keys of this object (not of nested ones) never read, sorted; keys whose
  // value is null are skipped.
  std::vector<std::string> unread() const;
  std::vector<std::string> keys() const;  // every key with a non-null value, sorted
  const std::string& prefix() const { return prefix_; }
  const std::string& file() const { return file_; }
  // "config.json: vision_config.hidden_size": where a value came from.
  std::string where(const std::string& key) const;

 private:
  JsonConfig(std::shared_ptr<const google::protobuf::Struct> root, const google::protobuf::Struct* node,
             std::string file, std::string prefix);
  const google::protobuf::Value* get(const std::string& key) const;
  [[noreturn]] void wrong_type(const std::string& key, const char* want) const;

  std::shared_ptr<const google::protobuf::Struct> root_;  // keeps `node_` alive
  const google::protobuf::Struct* node_;
  std::string file_;
  std::string prefix_;
  std::shared_ptr<std::set<std::string>> read_ = std::make_shared<std::set<std::string>>();
};

}  // namespace lacuna::importer
