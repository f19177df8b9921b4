// Strong types for the quantities the simulator adds up: time, bytes, FLOPs.
// Time is integer nanoseconds so that simulations are exact and deterministic.
#pragma once

#include <cmath>
#include <compare>
#include <cstdint>
#include <limits>

namespace lacuna {

template <class Tag, class Rep>
class Quantity {
 public:
  using rep = Rep;
  constexpr Quantity() = default;
  constexpr explicit Quantity(Rep v) : v_(v) {}
  constexpr Rep count() const { return v_; }

  constexpr auto operator<=>(const Quantity&) const = default;
  constexpr Quantity operator+(Quantity o) const { return Quantity(v_ + o.v_); }
  constexpr Quantity operator-(Quantity o) const { return Quantity(v_ - o.v_); }
  constexpr Quantity& operator+=(Quantity o) { v_ += o.v_; return *this; }
  constexpr Quantity& operator-=(Quantity o) { v_ -= o.v_; return *this; }
  constexpr Quantity operator-() const { return Quantity(-v_); }
  constexpr Quantity operator*(Rep k) const { return Quantity(v_ * k); }
  constexpr Quantity operator/(Rep k) const { return Quantity(v_ / k); }
  constexpr double operator/(Quantity o) const {
    return static_cast<double>(v_) / static_cast<double>(o.v_);
  }
  static constexpr Quantity zero() { return Quantity(Rep{}); }
  static constexpr Quantity max() { return Quantity(std::numeric_limits<Rep>::max()); }

 private:
  Rep v_{};
};

// Simulated time in integer nanoseconds.
class TimeNs : public Quantity<struct TimeTag, int64_t> {
 public:
  using Quantity::Quantity;
  constexpr TimeNs(Quantity q) : Quantity(q) {}  // NOLINT: arithmetic results
  // Rounds to the nearest nanosecond; callers pass finite, non-negative values.
  static TimeNs from_seconds(double s) { return TimeNs(static_cast<int64_t>(std::llround(s * 1e9))); }
  static TimeNs from_ms(double ms) { return TimeNs(static_cast<int64_t>(std::llround(ms * 1e6))); }
  static TimeNs from_us(double us) { return TimeNs(static_cast<int64_t>(std::llround(us * 1e3))); }
  constexpr double seconds() const { return static_cast<double>(count()) * 1e-9; }
  constexpr double ms() const { return static_cast<double>(count()) * 1e-6; }
  constexpr double us() const { return static_cast<double>(count()) * 1e-3; }
};

class Bytes : public Quantity<struct BytesTag, int64_t> {
 public:
  using Quantity::Quantity;
  constexpr Bytes(Quantity q) : Quantity(q) {}  // NOLINT
  constexpr double gb() const { return static_cast<double>(count()) * 1e-9; }
  constexpr double gib() const { return static_cast<double>(count()) / (1024.0 * 1024.0 * 1024.0); }
};

// FLOP counts exceed 2^63 for a whole iteration of a large job: double.
class Flops : public Quantity<struct FlopsTag, double> {
 public:
  using Quantity::Quantity;
  constexpr Flops(Quantity q) : Quantity(q) {}  // NOLINT
};

constexpr TimeNs operator""_ns(unsigned long long v) { return TimeNs(static_cast<int64_t>(v)); }
constexpr TimeNs operator""_us(unsigned long long v) { return TimeNs(static_cast<int64_t>(v) * 1000); }
constexpr TimeNs operator""_ms(unsigned long long v) { return TimeNs(static_cast<int64_t>(v) * 1000000); }

}  // namespace lacuna
