// JSON via protobuf's JsonStringToMessage, whose errors carry no position. A
// small scanner walks the document first, with the schema at hand: it reports
// syntax errors, unknown fields, wrongly typed values and unknown enum names at
// their line:column, and records where every field path stands.
#include <google/protobuf/descriptor.h>
#include <google/protobuf/util/json_util.h>

#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <set>

#include "sim/scenario/parse.h"

namespace lacuna::scenario {

namespace {

namespace pb = google::protobuf;
using FD = pb::FieldDescriptor;

constexpr int kMaxDepth = 64;

struct Pos {
  int line = 1;
  int column = 1;
};

// What the value at hand must be.
struct Expect {
  const FD* field = nullptr;       // null: the root message
  bool element = false;            // an element of a repeated field / a map value
  const pb::Descriptor* root = nullptr;
};

std::string field_list(const pb::Descriptor* d) {
  std::string out;
  for (int i = 0; i < d->field_count(); ++i) out += (i ? ", " : "") + d->field(i)->name();
  return out;
}

std::string enum_list(const pb::EnumDescriptor* e) {
  std::string out;
  for (int i = 0; i < e->value_count(); ++i) {
    if (e->value(i)->number() == 0 && e->value(i)->name().find("UNSPECIFIED") != std::string::npos) continue;
    out += (out.empty() ? "" : ", ") + e->value(i)->name();
  }
  return out;
}

const FD* find_field(const pb::Descriptor* d, const std::string& key) {
  if (const auto* f = d->FindFieldByName(key)) return f;
  for (int i = 0; i < d->field_count(); ++i)
    if (d->field(i)->json_name() == key) return d->field(i);
  return nullptr;
}

void append_utf8(std::string& out, uint32_t cp) {
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xC0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xE0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  }
}

class Scanner {
 public:
  Scanner(std::string_view text, SourceMap& out) : s_(text), out_(out) {}

  void run(const pb::Descriptor* root) {
    skip_ws();
    if (at_end()) fail(pos(), "the file contains no JSON value");
    if (peek() != '{') fail(pos(), "a scenario must be a JSON object ({ ... })");
    value(Expect{nullptr, false, root}, "", 0);
    skip_ws();
    if (!at_end()) fail(pos(), "unexpected text after the end of the JSON document");
  }

 private:
  bool at_end() const { return i_ >= s_.size(); }
  char peek() const { return s_[i_]; }
  Pos pos() const { return Pos{line_, static_cast<int>(i_ - line_start_) + 1}; }

  void advance() {
    if (s_[i_] == '\n') {
      ++line_;
      line_start_ = i_ + 1;
    }
    ++i_;
  }

  [[noreturn]] void fail(Pos p, const std::string& what, const std::string& field = {},
                         const std::string& fix = {}) const {
    throw Error(SourceLocation{out_.file(), p.line, p.column, field}, what,
                fix.empty() ? "the file must be valid JSON for the schema in docs/scenario.md" : fix);
  }

  void skip_ws() {
    while (!at_end() && (peek() == ' ' || peek() == '\t' || peek() == '\n' || peek() == '\r')) advance();
  }

  void expect_char(char c, const char* what) {
    skip_ws();
    if (at_end()) fail(pos(), std::string("unexpected end of file: expected ") + what);
    if (peek() != c) fail(pos(), std::string("expected ") + what + ", found '" + printable(peek()) + "'");
    advance();
  }

  static std::string printable(char c) {
    const auto u = static_cast<unsigned char>(c);
    if (u >= 0x20 && u < 0x7F) return std::string(1, c);
    char buf[8];
    std::snprintf(buf, sizeof buf, "\\x%02X", u);
    return buf;
  }

  std::string string_token() {
    const Pos start = pos();
    advance();  // opening quote
    std::string out;
    while (true) {
      if (at_end()) fail(start, "unterminated string");
      const char c = peek();
      if (c == '"') {
        advance();
        return out;
      }
      if (static_cast<unsigned char>(c) < 0x20) fail(pos(), "control character inside a string");
      if (c != '\\') {
        out += c;
        advance();
        continue;
      }
      advance();
      if (at_end()) fail(start, "unterminated string");
      const char e = peek();
      advance();
      switch (e) {
        case '"': out += '"'; break;
        case '\\': out += '\\'; break;
        case '/': out += '/'; break;
        case 'b': out += '\b'; break;
        case 'f': out += '\f'; break;
        case 'n': out += '\n'; break;
        case 'r': out += '\r'; break;
        case 't': out += '\t'; break;
        case 'u': {
          uint32_t cp = 0;
          for (int k = 0; k < 4; ++k) {
            if (at_end() || !std::isxdigit(static_cast<unsigned char>(peek())))
              fail(pos(), "\\u must be followed by four hex digits");
            const char h = peek();
            cp = cp * 16 + static_cast<uint32_t>(std::isdigit(static_cast<unsigned char>(h)) ? h - '0'
                                                                                            : (h | 0x20) - 'a' + 10);
            advance();
          }
          append_utf8(out, cp);
          break;
        }
        default: fail(pos(), std::string("invalid escape \\") + printable(e) + " in a string");
      }
    }
  }

  std::string number_token() {
    const size_t begin = i_;
    auto digits = [&] {
      const size_t from = i_;
      while (!at_end() && std::isdigit(static_cast<unsigned char>(peek()))) advance();
      if (i_ == from) fail(pos(), "malformed number");
    };
    if (peek() == '-') advance();
    if (at_end()) fail(pos(), "malformed number");
    if (peek() == '0') {
      advance();
    } else {
      digits();
    }
    if (!at_end() && peek() == '.') {
      advance();
      digits();
    }
    if (!at_end() && (peek() == 'e' || peek() == 'E')) {
      advance();
      if (!at_end() && (peek() == '+' || peek() == '-')) advance();
      digits();
    }
    return std::string(s_.substr(begin, i_ - begin));
  }

  // Integer fields take an integer in range, as a number or a string.
  void check_number(const FD* f, const std::string& text, Pos start, const std::string& path, bool quoted) const {
    const auto t = f->cpp_type();
    if (t == FD::CPPTYPE_DOUBLE || t == FD::CPPTYPE_FLOAT) {
      if (!quoted || text == "NaN" || text == "Infinity" || text == "-Infinity") return;
      char* end = nullptr;
      std::strtod(text.c_str(), &end);
      if (text.empty() || *end != '\0') fail(start, "\"" + text + "\" is not a number", path, "write a number");
      return;
    }
    const bool is_unsigned = t == FD::CPPTYPE_UINT32 || t == FD::CPPTYPE_UINT64;
    const bool is_32 = t == FD::CPPTYPE_INT32 || t == FD::CPPTYPE_UINT32;
    size_t k = text.size() > 0 && text[0] == '-' ? 1 : 0;
    bool digits = k < text.size();
    for (size_t j = k; j < text.size(); ++j) digits = digits && std::isdigit(static_cast<unsigned char>(text[j]));
    if (!digits) fail(start, "expected an integer, found " + text, path, "write a whole number without a fraction or exponent");
    errno = 0;
    char* end = nullptr;
    bool in_range = true;
    if (is_unsigned) {
      const auto v = std::strtoull(text.c_str(), &end, 10);
      in_range = errno == 0 && k == 0 && (!is_32 || v <= 0xFFFFFFFFull);
    } else {
      const auto v = std::strtoll(text.c_str(), &end, 10);
      in_range = errno == 0 && (!is_32 || (v >= INT32_MIN && v <= INT32_MAX));
    }
    if (!in_range) fail(start, text + " is out of range for this field", path, "use a realistic value");
  }

  // Returns the literal scanned: "true", "false" or "null".
  std::string literal_token() {
    for (const char* word : {"true", "false", "null"}) {
      const std::string_view w(word);
      if (s_.substr(i_, w.size()) == w) {
        for (size_t k = 0; k < w.size(); ++k) advance();
        return std::string(w);
      }
    }
    fail(pos(), std::string("unexpected character '") + printable(peek()) + "'");
  }

  static std::string kind_name(const FD* f) {
    switch (f->cpp_type()) {
      case FD::CPPTYPE_MESSAGE: return "an object";
      case FD::CPPTYPE_STRING: return "a string";
      case FD::CPPTYPE_BOOL: return "true or false";
      case FD::CPPTYPE_ENUM: return "one of " + enum_list(f->enum_type());
      default: return "a number";
    }
  }

  void value(const Expect& e, const std::string& path, int depth) {
    if (depth > kMaxDepth) fail(pos(), "JSON nested deeper than " + std::to_string(kMaxDepth) + " levels");
    skip_ws();
    if (at_end()) fail(pos(), "unexpected end of file: expected a value");
    const Pos start = pos();
    const char c = peek();
    const FD* f = e.field;
    const bool is_array_field = f && f->is_repeated() && !e.element && !f->is_map();
    const bool is_map_field = f && f->is_map() && !e.element;
    const bool is_object = !f || is_map_field || (!is_array_field && f->cpp_type() == FD::CPPTYPE_MESSAGE);

    if (c == 'n' && s_.substr(i_, 4) == "null") {
      literal_token();  // null means "not set" for any field
      return;
    }
    auto wrong = [&](const char* found) {
      const std::string want = is_array_field ? "an array" : is_map_field ? "an object" : kind_name(f);
      fail(start, "expected " + want + ", found " + found, path,
           "write " + path + " as " + want + " (see docs/scenario.md)");
    };
    if (c == '{') {
      if (f && !is_object) wrong("an object");
      object(e, path, depth);
      return;
    }
    if (c == '[') {
      if (!is_array_field) {
        if (!f) fail(start, "a scenario must be a JSON object ({ ... })");
        wrong("an array");
      }
      array(e, path, depth);
      return;
    }
    if (!f) fail(start, "a scenario must be a JSON object ({ ... })");
    if (is_array_field || is_object) {
      // Still scan the token so that syntax errors come first.
      if (c == '"') string_token();
      else if (c == '-' || std::isdigit(static_cast<unsigned char>(c))) number_token();
      else literal_token();
      wrong(c == '"' ? "a string" : (c == 't' || c == 'f') ? "a boolean" : "a number");
      return;
    }
    if (c == '"') {
      const std::string text = string_token();
      switch (f->cpp_type()) {
        case FD::CPPTYPE_STRING: return;
        case FD::CPPTYPE_BOOL: wrong("a string"); return;
        case FD::CPPTYPE_ENUM:
          if (!f->enum_type()->FindValueByName(text))
            fail(start, "unknown value \"" + text + "\"", path, "use one of " + enum_list(f->enum_type()));
          return;
        default: check_number(f, text, start, path, true); return;  // proto3 JSON accepts quoted numbers
      }
    }
    if (c == '-' || std::isdigit(static_cast<unsigned char>(c))) {
      const std::string text = number_token();
      if (f->cpp_type() == FD::CPPTYPE_STRING || f->cpp_type() == FD::CPPTYPE_BOOL) wrong("a number");
      if (f->cpp_type() != FD::CPPTYPE_ENUM) check_number(f, text, start, path, false);
      return;
    }
    literal_token();
    if (f->cpp_type() != FD::CPPTYPE_BOOL) wrong("a boolean");
  }

  void object(const Expect& e, const std::string& path, int depth) {
    advance();  // {
    const FD* f = e.field;
    const bool is_map = f && f->is_map() && !e.element;
    const pb::Descriptor* msg = !f ? e.root : is_map ? nullptr : f->message_type();
    std::set<std::string> seen;
    skip_ws();
    if (!at_end() && peek() == '}') {
      advance();
      return;
    }
    while (true) {
      skip_ws();
      if (at_end()) fail(pos(), "unexpected end of file: expected a \"key\" or '}'");
      if (peek() != '"') fail(pos(), std::string("expected a \"key\" in double quotes, found '") + printable(peek()) + "'");
      const Pos key_pos = pos();
      const std::string key = string_token();
      Expect sub;
      std::string sub_path;
      if (is_map) {
        sub = Expect{f->message_type()->map_value(), true, nullptr};
        sub_path = path + "[" + key + "]";
      } else {
        const FD* field = find_field(msg, key);
        const std::string where = path.empty() ? "the scenario" : path;
        if (!field)
          fail(key_pos, "unknown field \"" + key + "\" in " + where, path,
               "fields of " + msg->name() + " are: " + field_list(msg));
        sub = Expect{field, false, nullptr};
        sub_path = path.empty() ? field->name() : path + "." + field->name();
      }
      if (!seen.insert(sub_path).second) fail(key_pos, "\"" + key + "\" appears twice", sub_path, "keep one of them");
      out_.add(sub_path, key_pos.line, key_pos.column);
      expect_char(':', "':' after the key");
      value(sub, sub_path, depth + 1);
      skip_ws();
      if (at_end()) fail(pos(), "unexpected end of file: expected ',' or '}'");
      if (peek() == ',') {
        advance();
        continue;
      }
      if (peek() == '}') {
        advance();
        return;
      }
      fail(pos(), std::string("expected ',' or '}', found '") + printable(peek()) + "'");
    }
  }

  void array(const Expect& e, const std::string& path, int depth) {
    advance();  // [
    skip_ws();
    if (!at_end() && peek() == ']') {
      advance();
      return;
    }
    for (int index = 0;; ++index) {
      skip_ws();
      const Pos p = pos();
      const std::string elem = path + "[" + std::to_string(index) + "]";
      out_.add(elem, p.line, p.column);
      value(Expect{e.field, true, nullptr}, elem, depth + 1);
      skip_ws();
      if (at_end()) fail(pos(), "unexpected end of file: expected ',' or ']'");
      if (peek() == ',') {
        advance();
        continue;
      }
      if (peek() == ']') {
        advance();
        return;
      }
      fail(pos(), std::string("expected ',' or ']', found '") + printable(peek()) + "'");
    }
  }

  std::string_view s_;
  SourceMap& out_;
  size_t i_ = 0;
  int line_ = 1;
  size_t line_start_ = 0;
};

}  // namespace

Scenario parse_json_format(std::string_view text, SourceMap& locations) {
  Scenario spec;
  Scanner(text, locations).run(spec.GetDescriptor());
  pb::util::JsonParseOptions options;
  options.ignore_unknown_fields = false;
  const auto status = pb::util::JsonStringToMessage(pb::StringPiece(text.data(), text.size()), &spec, options);
  if (!status.ok()) {
    // What the scanner lets through is a value protobuf rejects (an integer
    // out of range, a fraction for a count, a malformed number in a string).
    throw Error(SourceLocation{locations.file(), 0, 0, {}}, "invalid value: " + std::string(status.message()),
                "counts must be integers within range; see docs/scenario.md");
  }
  return spec;
}

}  // namespace lacuna::scenario
