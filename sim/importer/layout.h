// What a model file does not say: the cluster, the parallel layout and the
// batch. Both importers take them from the import command's options (or from
// the Megatron-LM command line) and fill the rest with documented defaults
// (docs/import.md#defaults), each field commented with its origin.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "sim/importer/annotated.h"

namespace lacuna::importer {

// A value and where it came from ("--tp", "# default: ..." text without '#').
template <class T>
struct Sourced {
  std::optional<T> value;
  std::string source;
  void set(T v, std::string from) {
    value = v;
    source = std::move(from);
  }
};

struct LayoutOptions {
  std::string cluster_preset = "h100-sxm";
  Sourced<int64_t> num_nodes, gpus_per_node;
  // WORLD_SIZE from the environment (torchrun's), used when --num-nodes is not given.
  std::optional<int64_t> world_size;
  Sourced<int64_t> tp, cp, pp, dp, virtual_stages, ep, expert_tp;
  Sourced<bool> sequence_parallel, distributed_optimizer;
  Sourced<int64_t> micro_batch, global_batch, seq_length;
};

// Fills cluster, parallel (tp, cp, pp, dp, virtual_stages, ep, expert_tp,
// sequence_parallel), schedule, training batch sizes and execution.software
// of `a.spec` from `o`; dp = GPUs / (tp·cp·pp) unless given. Throws
// lacuna::Error when the GPUs do not divide into the layout.
void apply_layout(const LayoutOptions& o, Annotated& a);

// Megatron-LM's padded vocabulary: the next multiple of
// make_vocab_size_divisible_by × tp (megatron/core/tokenizers/utils/
// build_tokenizer.py, vocab_size_with_padding).
int64_t padded_vocab(int64_t vocab, int64_t divisible_by, int64_t tp);

}  // namespace lacuna::importer
