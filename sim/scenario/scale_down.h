// `--scale-down N`: a smaller version of a scenario's model, so that a CI
// machine can run (execute) a multi-rank (M)LLM program on CPU threads. It
// edits the scenario before validation and compilation, so that calibrate,
// compile, simulate and execute all see the same scaled program: a prediction
// and a measurement must be about the same program.
//
// What is divided by N (docs/scenario.md#scale-down says why per field):
//   model.llm.{hidden_size, ffn_hidden_size, seq_length}
//   model.encoders[i].transformer.{hidden_size, ffn_hidden_size, seq_length}
// Everything else stays: heads and KV heads (the head dimension shrinks by N),
// layers, vocabulary, the projector's token merge, the data mix (images per
// sample or vision token share), batch sizes, the parallel plan, the schedule,
// the placement and the cluster.
#pragma once

#include <cstdint>

#include "sim/scenario/scenario.h"

namespace lacuna::scenario {

// Divides the sizes above by `factor` (1: no change). Throws lacuna::Error,
// located through `locations` when given, naming the field that does not
// divide (its path, value and the factor) and the largest factor that works.
// The result is not validated here: load_scenario validates it (and says
// "after --scale-down N" when only the scaled values break a rule).
void scale_down(Scenario& spec, int64_t factor);
void scale_down(Scenario& spec, int64_t factor, const SourceMap& locations);

// The largest factor for which scale_down succeeds and the scaled scenario
// passes validate_scenario; 1 when no factor above 1 does. `spec` should be a
// validated scenario with its cluster preset resolved (as LoadedScenario::spec).
int64_t largest_scale_down(const Scenario& spec);

}  // namespace lacuna::scenario
