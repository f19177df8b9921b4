// Helpers the runtime tests share (on top of the engine tests' program
// builders, sim/engine/engine_test_support.h).
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <string>

#include "runtime/executor.h"
#include "sim/core/error.h"
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
