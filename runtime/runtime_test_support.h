// Helpers the runtime tests share (on top of the engine tests' program
// builders, sim/engine/engine_test_support.h).
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <string>

#include "runtime/executor.h"
#include "sim/core/error.h"
#include "sim/engine/engine_test_support.h"
#include "sim/proto/program.pb.h"

namespace lacuna::runtime::testing {

// A forward GEMM [m, n, k] that runs a real CPU (or GPU) kernel case.
inline ir::Op& add_gemm(ir::Stream* s, int64_t m, int64_t n, int64_t k) {
  ir::Op* op = s->add_ops();
  auto* c = op->mutable_compute();
  c->set_op_class(ir::GEMM);
  c->set_variant(ir::VARIANT_FORWARD);
  c->add_shape(m);
  c->add_shape(n);
  c->add_shape(k);
  return *op;
}

// Two ranks of one class, streams "compute" (a forward GEMM [m, n, k]) and
// "dp" (one collective of `bytes` on a DP group of both ranks).
inline ir::Program two_ranks_gemm_and_collective(int64_t m, int64_t n, int64_t k, ir::CollectiveKind kind,
                                                 int64_t bytes) {
  ir::Program p;
  ir::RankClass* c = engine::testing::add_class(p, "r", 0, {"compute", "dp"});
  add_gemm(c->mutable_streams(0), m, n, k);
  engine::testing::add_collective(c->mutable_streams(1), kind, 0, bytes);
  p.add_group_slots()->set_name("dp");
  p.mutable_group_slots(0)->set_kind(ir::DP);
  const int32_t g = engine::testing::add_group(p, ir::DP, {0, 1});
  engine::testing::add_rank(p, 0, {g});
  engine::testing::add_rank(p, 0, {g});
  return p;
}

// The span of (rank, stream, op) in `iteration` (-1: any); null if absent.
inline const ExecutedSpan* find_span(const ExecutionResult& r, int rank, int stream, int op, int iteration = -1) {
  for (const ExecutedSpan& s : r.spans) {
    if (s.rank == rank && s.stream == stream && s.op == op && (iteration < 0 || s.iteration == iteration)) return &s;
  }
  return nullptr;
}

// The message of the lacuna::Error the CPU executor throws (a test failure if
// it does not throw).
inline std::string execute_error(const ir::Program& p, const ExecuteOptions& options) {
  try {
    execute(p, options);
  } catch (const lacuna::Error& e) {
    return e.what();
  }
  ADD_FAILURE() << "execute did not throw";
  return {};
}

}  // namespace lacuna::runtime::testing
