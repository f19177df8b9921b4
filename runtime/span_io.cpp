#include "runtime/span_io.h"

#include <cstring>
#include <limits>
#include <type_traits>

#include "sim/core/error.h"

namespace lacuna::runtime {
namespace {

constexpr std::uint32_t kMagic = 0x584e434cu;  // "LCNX" little-endian
// A sanity cap: a program's spans are far below this; a corrupt length is not.
constexpr std::uint64_t kMaxPayload = std::uint64_t{1} << 34;

template <typename T>
void put(std::string& out, T v) {
  static_assert(std::is_integral_v<T>);
  using U = std::make_unsigned_t<T>;
  auto u = static_cast<U>(v);
  for (std::size_t i = 0; i < sizeof(T); ++i) {
    out.push_back(static_cast<char>(u & 0xffu));
    u = static_cast<U>(u >> 8);  // sizeof(T) == 1: shifts an int, fine
  }
}

class Reader {
 public:
  Reader(std::string_view data, const std::string& source) : data_(data), source_(source) {}
  template <typename T>
  T get(const char* what) {
    static_assert(std::is_integral_v<T>);
    using U = std::make_unsigned_t<T>;
    need(sizeof(T), what);
    U u = 0;
    for (std::size_t i = 0; i < sizeof(T); ++i) {
      u = static_cast<U>(u | (static_cast<U>(static_cast<unsigned char>(data_[pos_ + i])) << (8 * i)));
    }
    pos_ += sizeof(T);
    return static_cast<T>(u);
  }
  std::string_view bytes(std::uint64_t n, const char* what) {
    need(n, what);
    std::string_view v = data_.substr(pos_, static_cast<std::size_t>(n));
    pos_ += static_cast<std::size_t>(n);
    return v;
  }
  std::uint64_t count(std::uint64_t each, const char* what) {
    const auto n = get<std::uint64_t>(what);
    if (each > 0 && n > (data_.size() - pos_) / each) {
      throw Error("truncated message from " + source_ + ": " + what + " announces " + std::to_string(n) +
                  " entries but only " + std::to_string(data_.size() - pos_) + " bytes follow");
    }
    return n;
  }
  void finish() const {
    if (pos_ != data_.size()) {
      throw Error("malformed message from " + source_ + ": " + std::to_string(data_.size() - pos_) +
                  " unexpected bytes at the end");
    }
  }

 private:
  void need(std::uint64_t n, const char* what) const {
    if (n > data_.size() - pos_) {
      throw Error("truncated message from " + source_ + ": " + what + " needs " + std::to_string(n) +
                  " bytes, " + std::to_string(data_.size() - pos_) + " left");
    }
  }
  std::string_view data_;
  std::size_t pos_ = 0;
  const std::string& source_;
};

constexpr std::uint64_t kSpanBytes = 3 * 4 + 4 + 3 * 8;

}  // namespace

std::string encode_message(MessageKind kind, std::string_view payload) {
  std::string out;
  out.reserve(kMessageHeaderBytes + payload.size());
  put(out, kMagic);
  put(out, kMessageVersion);
  put(out, static_cast<std::uint16_t>(kind));
  put(out, static_cast<std::uint64_t>(payload.size()));
  out.append(payload);
  return out;
}

std::uint64_t payload_size(std::string_view header, MessageKind expected, const std::string& source) {
  if (header.size() < kMessageHeaderBytes) {
    throw Error("truncated message from " + source + ": " + std::to_string(header.size()) + " of the " +
                std::to_string(kMessageHeaderBytes) + " header bytes" +
                (header.empty() ? " (it exited or closed its end without reporting)" : ""));
  }
  Reader r(header.substr(0, kMessageHeaderBytes), source);
  const auto magic = r.get<std::uint32_t>("magic");
  if (magic != kMagic) throw Error("message from " + source + " is not a lacuna message (bad magic)");
  const auto version = r.get<std::uint16_t>("version");
  if (version != kMessageVersion) {
    throw Error("message from " + source + " has format version " + std::to_string(version) + ", expected " +
                std::to_string(kMessageVersion) + " (a different lacuna build?)");
  }
  const auto kind = r.get<std::uint16_t>("kind");
  if (kind != static_cast<std::uint16_t>(expected)) {
    throw Error("message from " + source + " has kind " + std::to_string(kind) + ", expected " +
                std::to_string(static_cast<int>(expected)));
  }
  const auto n = r.get<std::uint64_t>("length");
  if (n > kMaxPayload) throw Error("message from " + source + " announces " + std::to_string(n) + " bytes: corrupt");
  return n;
}

std::string_view decode_message(std::string_view message, MessageKind expected, const std::string& source) {
  const std::uint64_t n = payload_size(message, expected, source);
  const std::size_t have = message.size() - kMessageHeaderBytes;
  if (have < n) {
    throw Error("truncated message from " + source + ": " + std::to_string(have) + " of " + std::to_string(n) +
                " payload bytes");
  }
  if (have > n) throw Error("malformed message from " + source + ": bytes after the payload");
  return message.substr(kMessageHeaderBytes);
}

std::string encode_outcome(const RankOutcome& o) {
  std::string p;
  p.reserve(64 + o.error.size() + o.spans.size() * kSpanBytes + o.iteration_ns.size() * 8);
  put(p, o.rank);
  put(p, o.emulated_ops);
  put(p, static_cast<std::uint64_t>(o.error.size()));
  p.append(o.error);
  put(p, static_cast<std::uint64_t>(o.iteration_ns.size()));
  for (std::int64_t v : o.iteration_ns) put(p, v);
  put(p, static_cast<std::uint64_t>(o.spans.size()));
  for (const ExecutedSpan& s : o.spans) {
    put(p, s.iteration);
    put(p, s.rank);
    put(p, s.stream);
    put(p, s.op);
    put(p, s.ready_ns);
    put(p, s.start_ns);
    put(p, s.end_ns);
  }
  return encode_message(MessageKind::kOutcome, p);
}

RankOutcome decode_outcome(std::string_view message, const std::string& source) {
  Reader r(decode_message(message, MessageKind::kOutcome, source), source);
  RankOutcome o;
  o.rank = r.get<std::int32_t>("rank");
  o.emulated_ops = r.get<std::int32_t>("emulated ops");
  const std::uint64_t err = r.count(1, "error text");
  o.error = std::string(r.bytes(err, "error text"));
  const std::uint64_t its = r.count(8, "iteration times");
  o.iteration_ns.reserve(static_cast<std::size_t>(its));
  for (std::uint64_t i = 0; i < its; ++i) o.iteration_ns.push_back(r.get<std::int64_t>("iteration time"));
  const std::uint64_t spans = r.count(kSpanBytes, "spans");
  o.spans.reserve(static_cast<std::size_t>(spans));
  for (std::uint64_t i = 0; i < spans; ++i) {
    ExecutedSpan s;
    s.iteration = r.get<std::int32_t>("span");
    s.rank = r.get<std::int32_t>("span");
    s.stream = r.get<std::int32_t>("span");
    s.op = r.get<std::int32_t>("span");
    s.ready_ns = r.get<std::int64_t>("span");
    s.start_ns = r.get<std::int64_t>("span");
    s.end_ns = r.get<std::int64_t>("span");
    o.spans.push_back(s);
  }
  r.finish();
  return o;
}

}  // namespace lacuna::runtime
