// For tests that run synthetic programs (synthetic.h) on the engine.
#pragma once

#include <cstdint>
#include <string_view>

#include <gtest/gtest.h>

#include "sim/cost/cost_model.h"
#include "sim/engine/simulator.h"
#include "sim/schedule/synthetic.h"

namespace lacuna::schedule::synthetic_support {

// Every synthetic op carries its duration; being asked means the program is wrong.
class NoCostModel : public cost::CostModel {
 public:
  std::string_view name() const override { return "none (synthetic)"; }
  TimeNs compute(const ir::Compute&) const override {
    ADD_FAILURE() << "cost model asked for a compute time";
    return TimeNs::zero();
  }
  TimeNs collective(ir::CollectiveKind, int64_t, const cost::GroupShape&) const override {
    ADD_FAILURE() << "cost model asked for a collective";
    return TimeNs::zero();
  }
  // A free transfer (p2p = 0) carries no bytes and has no fixed duration.
  TimeNs p2p(int64_t bytes, bool) const override {
    if (bytes != 0) ADD_FAILURE() << "cost model asked for a " << bytes << "-byte transfer";
    return TimeNs::zero();
  }
};

// When the pipeline's last op ends, in ns.
inline int64_t synthetic_end_ns(const SyntheticPipeline& p) {
  const NoCostModel cost;
  engine::Simulator sim(build_synthetic_program(p), cost);
  return sim.run().end_time.count();
}

}  // namespace lacuna::schedule::synthetic_support
