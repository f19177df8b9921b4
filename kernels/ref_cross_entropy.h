// CPU reference softmax cross-entropy of the LM head (docs/kernels.md:
// CROSS_ENTROPY [t, V_r]), unsplit and vocab-parallel as Megatron's
// _VocabParallelCrossEntropy.
//
// Storage T (float, or double for finite-difference tests), math in double
// with max subtraction (no overflow for large logits); call with an explicit
// T: ref::cross_entropy_forward<float>(...). Row-major, no global state;
// wrong sizes and targets outside the vocabulary throw lacuna::Error.
#pragma once

#include <cstdint>
#include <span>

namespace lacuna::kernels::ref {

// t tokens over a vocabulary of v logits each; both > 0.
struct CeShape {
  std::int64_t t = 0;
  std::int64_t v = 0;
};

// loss[i] = logsumexp(logits[i, :]) − logits[i, target[i]], target in [0, v).
// Writes the per-token loss[t] and returns its mean.
template <typename T>
double cross_entropy_forward(std::span<const T> logits, std::span<const std::int64_t> targets, CeShape s,
                             std::span<T> loss);

// dlogits[i, j] = dloss[i]·(softmax(logits[i])[j] − [j == target[i]]).
// For the mean loss pass dloss[i] = 1/t (or use cross_entropy_mean_backward).
template <typename T>
void cross_entropy_backward(std::span<const T> logits, std::span<const std::int64_t> targets,
                            std::span<const T> dloss, CeShape s, std::span<T> dlogits);

// Backward of the mean loss: dloss[i] = 1/t for every token.
template <typename T>
void cross_entropy_mean_backward(std::span<const T> logits, std::span<const std::int64_t> targets, CeShape s,
                                 std::span<T> dlogits);

// ---- vocab-parallel form: rank r holds logits[:, begin, begin + v_r) ----
// The caller plays the collectives between the steps, as Megatron's
// _VocabParallelCrossEntropy does over the TP group: an all-reduce MAX of the
// row maxima, then an all-reduce SUM of the target logits and of the sum-exps.
struct VocabShard {
  std::int64_t begin = 0;  // first vocabulary index this rank holds
  std::int64_t total = 0;  // the whole (padded) vocabulary; begin + local.v <= total
};

// Step 1, per rank: row_max[i] = max_j logits_shard[i, j]. Then all-reduce MAX.
template <typename T>
void vocab_parallel_row_max(std::span<const T> logits_shard, CeShape local, std::span<double> row_max);

// Step 2, per rank, with the global row maxima: sum_exp[i] = Σ_j exp(l[i,j] − max[i]) over
// the local columns; target_logit[i] = l[i, target[i]] − max[i] if the target is in this
// shard, else 0. Then all-reduce SUM of both.
template <typename T>
void vocab_parallel_partials(std::span<const T> logits_shard, std::span<const std::int64_t> targets,
                             CeShape local, VocabShard shard, std::span<const double> global_max,
                             std::span<double> sum_exp, std::span<double> target_logit);

// Step 3, identical on every rank: loss[i] = log(sum_exp[i]) − target_logit[i]; returns the mean.
template <typename T>
double vocab_parallel_loss(std::span<const double> sum_exp, std::span<const double> target_logit,
                           std::span<T> loss);

// Backward, per rank and without communication: dlogits_shard[i, j] =
// dloss[i]·(exp(l[i,j] − max[i]) / sum_exp[i] − [begin + j == target[i]]).
template <typename T>
void vocab_parallel_backward(std::span<const T> logits_shard, std::span<const std::int64_t> targets,
                             std::span<const T> dloss, CeShape local, VocabShard shard,
                             std::span<const double> global_max, std::span<const double> global_sum_exp,
                             std::span<T> dlogits_shard);

}  // namespace lacuna::kernels::ref
