// `lacuna import megatron ARGS...`: a Megatron-LM pretrain_gpt.py command
// line → an annotated scenario (docs/import.md). Flag names and defaults as
// in Megatron-LM's megatron/training/arguments.py and the dataclasses it
// builds its arguments from (megatron/core/transformer/transformer_config.py,
// megatron/core/model_parallel_config.py), NVIDIA/Megatron-LM d98e8a64.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "sim/importer/annotated.h"
#include "sim/importer/layout.h"

namespace lacuna::importer {

struct MegatronOptions {
  // Only the cluster: preset, num_nodes, gpus_per_node, WORLD_SIZE. The layout
  // and batch come from the command line.
  LayoutOptions layout;
};

// `args` are the command line's words after the script name (anything up to
// and including a word ending in ".py" is skipped). Unknown flags become a
// warning and a header comment naming each; flags known to have no effect on
// the step time (learning rate, data paths, logging) are listed as ignored.
// Throws lacuna::Error for a missing model flag (--num-layers, --hidden-size,
// --num-attention-heads, --seq-length), a malformed value, or GPUs that do
// not divide into the layout.
Annotated import_megatron(const std::vector<std::string>& args, const MegatronOptions& options);

// The words of a shell script or command-line file: `\`-newline joins lines,
// `#` comments and quotes are handled as a POSIX shell would for plain words;
// `$VAR` words are kept as written.
std::vector<std::string> split_command_line(std::string_view text);

}  // namespace lacuna::importer
