#include "kernels/ref_cross_entropy.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "kernels/ref_checks.h"
#include "sim/core/error.h"

namespace lacuna::kernels::ref {
namespace {

std::size_t checked_elements(const char* fn, CeShape s) {
  if (s.t <= 0 || s.v <= 0)
    throw Error(std::string(fn) + ": shape [t=" + std::to_string(s.t) + ", V=" + std::to_string(s.v) +
                "] must have t > 0 and V > 0");
  if (s.t > std::numeric_limits<std::int64_t>::max() / s.v) throw Error(std::string(fn) + ": t·V overflows");
  return static_cast<std::size_t>(s.t * s.v);
}

void check_targets(const char* fn, std::span<const std::int64_t> targets, std::int64_t vocab) {
  for (std::size_t i = 0; i < targets.size(); ++i)
    if (targets[i] < 0 || targets[i] >= vocab)
      throw Error(std::string(fn) + ": target[" + std::to_string(i) + "] = " + std::to_string(targets[i]) +
                  " is outside the vocabulary [0, " + std::to_string(vocab) + ")");
}

void check_shard(const char* fn, CeShape local, VocabShard shard) {
  if (shard.begin < 0 || shard.total <= 0 || shard.begin > shard.total - local.v)
    throw Error(std::string(fn) + ": shard [" + std::to_string(shard.begin) + ", +" + std::to_string(local.v) +
                ") does not fit a vocabulary of " + std::to_string(shard.total));
}

// Row max and Σ exp(l − max) of one row, in double.
template <typename T>
void row_stats(std::span<const T> row, double& mx, double& sum_exp) {
  mx = -std::numeric_limits<double>::infinity();
  for (T v : row) mx = std::max(mx, static_cast<double>(v));
  sum_exp = 0.0;
  for (T v : row) sum_exp += std::exp(v - mx);
}

}  // namespace

template <typename T>
double cross_entropy_forward(std::span<const T> logits, std::span<const std::int64_t> targets, CeShape s,
                             std::span<T> loss) {
  const char* fn = "ref::cross_entropy_forward";
  const std::size_t n = checked_elements(fn, s);
  const auto t = static_cast<std::size_t>(s.t), v = static_cast<std::size_t>(s.v);
  check_size(fn, "logits", logits.size(), n);
  check_size(fn, "targets", targets.size(), t);
  check_size(fn, "loss", loss.size(), t);
  check_targets(fn, targets, s.v);
  double total = 0.0;
  for (std::size_t i = 0; i < t; ++i) {
    const auto row = logits.subspan(i * v, v);
    double mx = 0.0, se = 0.0;
    row_stats(row, mx, se);
    // log Σ exp(l) − l_target = (mx + log Σ exp(l − mx)) − l_target, regrouped so
    // the large mx cancels against l_target before rounding.
    const double li = std::log(se) - (row[static_cast<std::size_t>(targets[i])] - mx);
    loss[i] = static_cast<T>(li);
    total += li;
  }
  return total / static_cast<double>(t);
}

template <typename T>
void cross_entropy_backward(std::span<const T> logits, std::span<const std::int64_t> targets,
                            std::span<const T> dloss, CeShape s, std::span<T> dlogits) {
  const char* fn = "ref::cross_entropy_backward";
  const std::size_t n = checked_elements(fn, s);
  const auto t = static_cast<std::size_t>(s.t), v = static_cast<std::size_t>(s.v);
  check_size(fn, "logits", logits.size(), n);
  check_size(fn, "targets", targets.size(), t);
  check_size(fn, "dloss", dloss.size(), t);
  check_size(fn, "dlogits", dlogits.size(), n);
  check_targets(fn, targets, s.v);
  for (std::size_t i = 0; i < t; ++i) {
    const auto row = logits.subspan(i * v, v);
    double mx = 0.0, se = 0.0;
    row_stats(row, mx, se);
    const auto target = static_cast<std::size_t>(targets[i]);
    for (std::size_t j = 0; j < v; ++j) {
      const double p = std::exp(row[j] - mx) / se;
      dlogits[i * v + j] = static_cast<T>(dloss[i] * (p - (j == target ? 1.0 : 0.0)));
    }
  }
}

template <typename T>
void cross_entropy_mean_backward(std::span<const T> logits, std::span<const std::int64_t> targets, CeShape s,
                                 std::span<T> dlogits) {
  checked_elements("ref::cross_entropy_mean_backward", s);
  const std::vector<T> dloss(static_cast<std::size_t>(s.t), static_cast<T>(1.0 / static_cast<double>(s.t)));
  cross_entropy_backward<T>(logits, targets, dloss, s, dlogits);
}

template <typename T>
void vocab_parallel_row_max(std::span<const T> logits_shard, CeShape local, std::span<double> row_max) {
  const char* fn = "ref::vocab_parallel_row_max";
  const std::size_t n = checked_elements(fn, local);
  const auto t = static_cast<std::size_t>(local.t), v = static_cast<std::size_t>(local.v);
  check_size(fn, "logits_shard", logits_shard.size(), n);
  check_size(fn, "row_max", row_max.size(), t);
  for (std::size_t i = 0; i < t; ++i) {
    double mx = -std::numeric_limits<double>::infinity();
    for (T x : logits_shard.subspan(i * v, v)) mx = std::max(mx, static_cast<double>(x));
    row_max[i] = mx;
  }
}

template <typename T>
void vocab_parallel_partials(std::span<const T> logits_shard, std::span<const std::int64_t> targets,
                             CeShape local, VocabShard shard, std::span<const double> global_max,
                             std::span<double> sum_exp, std::span<double> target_logit) {
  const char* fn = "ref::vocab_parallel_partials";
  const std::size_t n = checked_elements(fn, local);
  const auto t = static_cast<std::size_t>(local.t), v = static_cast<std::size_t>(local.v);
  check_shard(fn, local, shard);
  check_size(fn, "logits_shard", logits_shard.size(), n);
  check_size(fn, "targets", targets.size(), t);
  check_size(fn, "global_max", global_max.size(), t);
  check_size(fn, "sum_exp", sum_exp.size(), t);
  check_size(fn, "target_logit", target_logit.size(), t);
  check_targets(fn, targets, shard.total);
  for (std::size_t i = 0; i < t; ++i) {
    const auto row = logits_shard.subspan(i * v, v);
    double se = 0.0;
    for (T x : row) se += std::exp(x - global_max[i]);
    sum_exp[i] = se;
    // Only the rank holding the target contributes it; the others add 0 (Megatron masks them).
    const std::int64_t local_target = targets[i] - shard.begin;
    target_logit[i] = (local_target >= 0 && local_target < local.v)
                          ? row[static_cast<std::size_t>(local_target)] - global_max[i]
                          : 0.0;
  }
}

template <typename T>
double vocab_parallel_loss(std::span<const double> sum_exp, std::span<const double> target_logit,
                           std::span<T> loss) {
  const char* fn = "ref::vocab_parallel_loss";
  if (sum_exp.empty()) throw Error(std::string(fn) + ": no tokens (t must be > 0)");
  check_size(fn, "target_logit", target_logit.size(), sum_exp.size());
  check_size(fn, "loss", loss.size(), sum_exp.size());
  double total = 0.0;
  for (std::size_t i = 0; i < sum_exp.size(); ++i) {
    const double li = std::log(sum_exp[i]) - target_logit[i];
    loss[i] = static_cast<T>(li);
    total += li;
  }
  return total / static_cast<double>(sum_exp.size());
}

template <typename T>
void vocab_parallel_backward(std::span<const T> logits_shard, std::span<const std::int64_t> targets,
                             std::span<const T> dloss, CeShape local, VocabShard shard,
                             std::span<const double> global_max, std::span<const double> global_sum_exp,
                             std::span<T> dlogits_shard) {
  const char* fn = "ref::vocab_parallel_backward";
  const std::size_t n = checked_elements(fn, local);
  const auto t = static_cast<std::size_t>(local.t), v = static_cast<std::size_t>(local.v);
  check_shard(fn, local, shard);
  check_size(fn, "logits_shard", logits_shard.size(), n);
  check_size(fn, "targets", targets.size(), t);
  check_size(fn, "dloss", dloss.size(), t);
  check_size(fn, "global_max", global_max.size(), t);
  check_size(fn, "global_sum_exp", global_sum_exp.size(), t);
  check_size(fn, "dlogits_shard", dlogits_shard.size(), n);
  check_targets(fn, targets, shard.total);
  for (std::size_t i = 0; i < t; ++i) {
    const std::int64_t local_target = targets[i] - shard.begin;
    for (std::size_t j = 0; j < v; ++j) {
      const double p = std::exp(logits_shard[i * v + j] - global_max[i]) / global_sum_exp[i];
      const double onehot = static_cast<std::int64_t>(j) == local_target ? 1.0 : 0.0;
      dlogits_shard[i * v + j] = static_cast<T>(dloss[i] * (p - onehot));
    }
  }
}

#define LACUNA_REF_CE(T)                                                                                     \
  template double cross_entropy_forward<T>(std::span<const T>, std::span<const std::int64_t>, CeShape,       \
                                           std::span<T>);                                                    \
  template void cross_entropy_backward<T>(std::span<const T>, std::span<const std::int64_t>,                 \
                                          std::span<const T>, CeShape, std::span<T>);                        \
  template void cross_entropy_mean_backward<T>(std::span<const T>, std::span<const std::int64_t>, CeShape,   \
                                               std::span<T>);                                                \
  template void vocab_parallel_row_max<T>(std::span<const T>, CeShape, std::span<double>);                   \
  template void vocab_parallel_partials<T>(std::span<const T>, std::span<const std::int64_t>, CeShape,       \
                                           VocabShard, std::span<const double>, std::span<double>,           \
                                           std::span<double>);                                               \
  template double vocab_parallel_loss<T>(std::span<const double>, std::span<const double>, std::span<T>);    \
  template void vocab_parallel_backward<T>(std::span<const T>, std::span<const std::int64_t>,                \
                                           std::span<const T>, CeShape, VocabShard,                          \
                                           std::span<const double>, std::span<const double>, std::span<T>);
LACUNA_REF_CE(float)
LACUNA_REF_CE(double)
#undef LACUNA_REF_CE

}  // namespace lacuna::kernels::ref
