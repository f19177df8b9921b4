// Helpers shared by the validation passes: each check throws the first
// problem as a lacuna::Error located through the SourceMap.
#pragma once

#include <google/protobuf/generated_enum_reflection.h>

#include <cmath>
#include <string>
#include <vector>

#include "sim/scenario/scenario.h"

namespace lacuna::scenario {

// Upper bounds that keep downstream int64 arithmetic (bytes, FLOPs, token
// counts, products of these) far from overflow.
struct Limits {
  static constexpr int64_t kLayers = 100'000;
  static constexpr int64_t kHidden = 1'000'000;
  static constexpr int64_t kHeads = 100'000;
  static constexpr int64_t kFfn = 10'000'000;
  static constexpr int64_t kVocab = 100'000'000;
  static constexpr int64_t kSeq = 100'000'000;
  static constexpr int64_t kGpus = 1'000'000;
  static constexpr int64_t kBatch = 100'000'000;
  static constexpr int64_t kVirtualStages = 100'000;
  static constexpr int64_t kGpusPerNode = 64;
  static constexpr int64_t kSms = 10'000;
  // micro_batch × seq_length × hidden_size: one microbatch's activation tensor.
  static constexpr int64_t kActivationElements = int64_t{1} << 50;
  // Estimated ops per pipeline rank (microbatches × layers per rank × ~60).
  static constexpr double kOpsPerRank = 5e6;
  static constexpr double kOpsPerLayerMicrobatch = 60;
  // Estimated ops of the whole program (microbatches × every stage's layers
  // × ~60; the compiler builds at least one class per pipeline stage). The
  // compiler holds about 220 bytes per op (measured: `lacuna compile
  // scenarios/validation/ptdp-10-1t.pbtxt`, 6.4 M ops, 1.41 GB peak RSS), so
  // 3e7 estimated ops is about 10 GB; the largest shipped scenario estimates
  // 3.9e6 (docs/reliability.md#bounded-runs).
  static constexpr double kOpsPerProgram = 3e7;
};

class Checker {
 public:
  explicit Checker(const SourceMap& locations) : m_(locations) {}

  [[noreturn]] void fail(const std::string& path, const std::string& what, const std::string& fix) const {
    throw Error(m_.locate(path), what, fix);
  }

  void count(const std::string& path, int64_t value, int64_t max, const std::string& fix_if_zero = {}) const {
    if (value <= 0)
      fail(path, "must be a positive integer, got " + std::to_string(value),
           fix_if_zero.empty() ? "set it to at least 1" : fix_if_zero);
    if (value > max)
      fail(path, std::to_string(value) + " is above the supported maximum " + std::to_string(max),
           "use a realistic value (at most " + std::to_string(max) + ")");
  }

  // (0, max] when !allow_zero, [0, max] otherwise; NaN and infinities rejected.
  void real(const std::string& path, double value, double max, bool allow_zero) const {
    if (!std::isfinite(value)) fail(path, "must be a finite number", "write a plain number");
    if (allow_zero ? value < 0 : value <= 0)
      fail(path, std::string("must be ") + (allow_zero ? "≥ 0" : "> 0") + ", got " + fmt(value),
           allow_zero ? "use 0 or a positive value" : "use a positive value");
    if (value > max) fail(path, fmt(value) + " is above the supported maximum " + fmt(max), "use a realistic value");
  }

  // A positive rate (TFLOP/s, GB/s) no real device falls below: a lower one
  // (1e-12) would make every derived duration overflow int64 nanoseconds.
  void rate(const std::string& path, double value, double min, double max, const char* unit) const {
    real(path, value, max, false);
    if (value < min)
      fail(path, fmt(value) + " " + unit + " is below the supported minimum " + fmt(min) + " " + unit,
           "use the device's real figure");
  }

  // Achieved / peak, at least 0.001 (below that the device is not running
  // the kernel, and durations derived from it overflow).
  void fraction(const std::string& path, double value) const {
    if (!std::isfinite(value) || value < 1e-3 || value > 1)
      fail(path, "must be in [0.001, 1] (achieved / peak), got " + fmt(value), "use a fraction such as 0.8");
  }

  template <class E>
  void enumeration(const std::string& path, E value) const {
    const auto* d = google::protobuf::GetEnumDescriptor<E>();
    const auto* v = d->FindValueByNumber(static_cast<int>(value));
    if (v && v->name().find("UNSPECIFIED") == std::string::npos) return;
    std::string valid;
    for (int i = 0; i < d->value_count(); ++i) {
      if (d->value(i)->name().find("UNSPECIFIED") != std::string::npos) continue;
      valid += (valid.empty() ? "" : ", ") + d->value(i)->name();
    }
    fail(path, v ? "is not set" : "has no value " + std::to_string(static_cast<int>(value)),
         "set it to one of " + valid);
  }

  // An enum whose zero value means "automatic": any known value passes.
  template <class E>
  void enumeration_or_unset(const std::string& path, E value) const {
    const auto* d = google::protobuf::GetEnumDescriptor<E>();
    if (d->FindValueByNumber(static_cast<int>(value)) != nullptr) return;
    std::string valid;
    for (int i = 0; i < d->value_count(); ++i) valid += (valid.empty() ? "" : ", ") + d->value(i)->name();
    fail(path, "has no value " + std::to_string(static_cast<int>(value)), "set it to one of " + valid);
  }

  static std::string fmt(double v) {
    char buf[64];
    std::snprintf(buf, sizeof buf, "%g", v);
    return buf;
  }

 private:
  const SourceMap& m_;
};

// A section's independent checks, each run to its own first problem, with
// every problem kept: `check` returns whether its check passed, so a rule
// that reads fields runs only once they are valid (no division by a tp <= 0
// already reported). throw_if_any throws them all as one Error::all_of.
class Problems {
 public:
  template <class Check>
  bool check(Check&& run) {
    try {
      run();
      return true;
    } catch (const Error& e) {
      add(e);
      return false;
    }
  }
  void add(const Error& e) {
    if (e.parts().empty()) {
      errors_.push_back(e);
      return;
    }
    errors_.insert(errors_.end(), e.parts().begin(), e.parts().end());
  }
  bool empty() const { return errors_.empty(); }
  void throw_if_any() {
    if (!errors_.empty()) throw Error::all_of(std::move(errors_));
  }

 private:
  std::vector<Error> errors_;
};

// Section passes, in the order validate_scenario runs them. Each reports
// every problem of its section at once (Problems); a rule that ties fields
// together runs once those fields passed.
// Every string field valid UTF-8, and the name of a size file names take
// (validate_text.cpp); before the sections, which quote field values.
void validate_text(const Scenario& spec, const Checker& c);
void validate_model(const Scenario& spec, const Checker& c);
void validate_training(const Scenario& spec, const Checker& c);
void validate_cluster(const Scenario& spec, const Checker& c);
// cluster.nvlink_domain_gpus / max_nvlink_domain_gpus (validate_nvlink_domain.cpp);
// called by validate_cluster once num_nodes and gpus_per_node are valid.
void validate_nvlink_domain(const Scenario& spec, const Checker& c);
void validate_parallel(const Scenario& spec, const Checker& c);
void validate_consistency(const Scenario& spec, const Checker& c);
// training.fp8 against the precision and the GPU (validate_fp8.cpp, docs/fp8.md).
void validate_fp8(const Scenario& spec, const Checker& c);
// The variability section (validate_variability.cpp), its preset defaults
// resolved; after the cluster (node and link indices).
void validate_variability(const Scenario& spec, const Checker& c);
// The reliability section (validate_reliability.cpp): kinds and ranges.
void validate_reliability(const Scenario& spec, const Checker& c);
// Multimodal fields (validate_mllm.cpp): encoders, data mix, encoder layouts
// and rank sets, placement. Runs before validate_consistency.
void validate_multimodal(const Scenario& spec, const Checker& c);
// Whether a HETEROGENEOUS encoder sits on an island of its own after the
// LLM's ranks, and how many GPUs that island takes (0 without one; under
// MEGATRON_ENCODER_PP the encoder's own ranks, dp · encoder tp·pp·cp). Valid
// once validate_multimodal passed: the LLM then owns [0, GPUs − island).
bool has_encoder_island(const Scenario& spec);
int64_t encoder_island_gpus(const Scenario& spec);

}  // namespace lacuna::scenario
