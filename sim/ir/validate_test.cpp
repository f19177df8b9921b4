// ir::validate_program on hand-built and randomly corrupted programs: every
// corruption is refused by name, or validates and then runs to an end, a
// deadlock or a mismatch error in the simulator; never a crash or a hang.
#include "sim/ir/validate.h"

#include <gmock/gmock.h>
#include <google/protobuf/descriptor.h>
#include <google/protobuf/message.h>
#include <google/protobuf/reflection.h>
#include <gtest/gtest.h>

#include <functional>
#include <limits>
#include <random>

#include "sim/engine/engine_test_support.h"
#include "sim/engine/pipeline_program.h"
#include "sim/engine/simulator.h"

namespace lacuna::engine {
namespace {

using testing::ClosedFormCost;
using testing::make_pipeline_program;
using testing::PipelineSpec;
using ::testing::HasSubstr;

ir::Program small_program() {
  PipelineSpec spec;
  spec.tp = 2;
  spec.pp = 2;
  spec.dp = 2;
  spec.microbatches = 2;
  spec.layers_per_stage = 1;
  return make_pipeline_program(spec);
}

std::string rejection(const ir::Program& p) {
  try {
    ir::validate_program(p, "program.pb");
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(Validate, AcceptsWellFormedPrograms) {
  EXPECT_EQ(rejection(small_program()), "");
  ir::Program with_host = small_program();
  testing::add_random_host_costs(with_host, 1, 1000, 3);
  EXPECT_EQ(rejection(with_host), "");
}

TEST(Validate, PeerOutOfRange) {
  ir::Program p = small_program();
  p.mutable_ranks(3)->set_peer(1, 9000);
  EXPECT_EQ(rejection(p), "program.pb: ranks[3].peer[1]: rank 9000 out of range (program has 8 ranks)");
}

TEST(Validate, NamesTheOffendingElement) {
  struct Case {
    std::function<void(ir::Program&)> corrupt;
    std::string expected;
  };
  const std::vector<Case> cases = {
      {[](ir::Program& p) { p.mutable_ranks(2)->set_class_id(7); }, "ranks[2].class_id: class 7 out of range"},
      {[](ir::Program& p) { p.mutable_ranks(0)->set_group(0, 99); }, "ranks[0].group[0]: group 99 out of range"},
      {[](ir::Program& p) { p.mutable_ranks(0)->set_group(0, 1); },
       "ranks[0].group[0]: rank 0 is bound to group 1 but is not a member of it"},
      {[](ir::Program& p) { p.mutable_ranks(0)->set_group(1, -1); },
       "ranks[0].group[1]: no group bound, but class 0 uses group slot 1"},
      {[](ir::Program& p) { p.mutable_ranks(4)->set_peer(0, -1); },
       "ranks[4].peer[0]: no peer bound, but class 1 uses peer slot 0"},
      {[](ir::Program& p) { p.mutable_groups(0)->set_ranks(1, 0); }, "groups[0].ranks[1]: ranks must be strictly ascending"},
      {[](ir::Program& p) { p.mutable_classes(0)->set_num_events(-1); }, "classes[0].num_events: must be in"},
      {[](ir::Program& p) { p.mutable_classes(0)->mutable_streams(0)->mutable_ops(1)->mutable_record()->set_event(5); },
       "classes[0].streams[0].ops[1].record.event: event 5 out of range (class has 5 events)"},
      {[](ir::Program& p) { p.mutable_classes(0)->mutable_streams(1)->mutable_ops(0)->mutable_wait()->set_value(-2); },
       "classes[0].streams[1].ops[0].wait.value: must be >= 0"},
      {[](ir::Program& p) {
         p.mutable_classes(0)->mutable_streams(1)->mutable_ops(1)->mutable_collective()->set_group_slot(2);
       },
       "group slot 2 out of range (program has 2 group slots)"},
      {[](ir::Program& p) {
         p.mutable_classes(0)->mutable_streams(1)->mutable_ops(1)->mutable_collective()->set_bytes(-1);
       },
       "collective.bytes: must be >= 0"},
      {[](ir::Program& p) { p.mutable_classes(0)->mutable_streams(1)->mutable_ops(0)->set_host_ns(-5); },
       "classes[0].streams[1].ops[0].host_ns: must be >= 0 (the host's time to issue the op), got -5"},
      {[](ir::Program& p) { p.mutable_classes(0)->mutable_streams(0)->mutable_ops(0)->clear_kind(); },
       "classes[0].streams[0].ops[0]: op has no kind"},
      {[](ir::Program& p) { p.mutable_ranks(1)->set_compute_time_scale(-1); }, "ranks[1].compute_time_scale: must be in"},
      {[](ir::Program& p) { p.mutable_info()->set_num_ranks(3); }, "info.num_ranks: says 3 ranks"},
  };
  for (const Case& c : cases) {
    ir::Program p = small_program();
    c.corrupt(p);
    EXPECT_THAT(rejection(p), HasSubstr(c.expected));
  }
}

// Issue 16's bad-input cases: values that pass a sign check but overflow a
// derived sum (the running memory total, the end time) are refused by field.
TEST(Validate, BoundsKeepEveryDerivedSumInsideInt64) {
  const auto first_compute = [](ir::Program& p) -> ir::Compute* {
    for (auto& st : *p.mutable_classes(0)->mutable_streams())
      for (auto& op : *st.mutable_ops())
        if (op.has_compute()) return op.mutable_compute();
    return nullptr;
  };
  struct Case {
    std::function<void(ir::Compute&)> corrupt;
    std::string expected;
  };
  const std::vector<Case> cases = {
      {[](ir::Compute& c) { c.set_memory_delta_bytes(std::numeric_limits<int64_t>::max() - 5); },
       "compute.memory_delta_bytes: 9223372036854775802 bytes is beyond what one GPU can allocate"},
      {[](ir::Compute& c) { c.set_memory_delta_bytes(int64_t{1} << 49); }, ""},  // 512 TiB: allowed
      {[](ir::Compute& c) { c.set_fixed_duration_ns(9'000'000'000'000'000'000); },
       "compute.fixed_duration_ns: 9000000000000000000 is beyond what one op can last"},
      {[](ir::Compute& c) { c.set_flops(1e300); }, "compute.flops: 1e+300 is beyond what one op can run"},
      {[](ir::Compute& c) { c.set_bytes(1e300); }, "compute.bytes: 1e+300 is beyond what one op can touch"},
  };
  for (const Case& c : cases) {
    ir::Program p = small_program();
    ir::Compute* op = first_compute(p);
    ASSERT_NE(op, nullptr);
    c.corrupt(*op);
    if (c.expected.empty())
      EXPECT_EQ(rejection(p), "");
    else
      EXPECT_THAT(rejection(p), HasSubstr(c.expected));
  }
  // Many deltas each within bounds but together beyond 2^62.
  ir::Program p = small_program();
  auto* st = p.mutable_classes(0)->mutable_streams(0);
  for (int i = 0; i < 4097; ++i) {
    auto* c = st->add_ops()->mutable_compute();
    c->set_op_class(ir::ELEMENTWISE);
    c->set_memory_delta_bytes(i % 2 == 0 ? int64_t{1} << 50 : -(int64_t{1} << 50));
  }
  EXPECT_THAT(rejection(p), HasSubstr("add up to more than 2^62 bytes"));
}

// ---------------------------------------------------------------- random corruption

int64_t interesting_value(std::mt19937_64& rng) {
  static const int64_t values[] = {-1000000, -2, -1, 0, 1, 2, 3, 4, 5, 7, 8, 16, 1000, 9000,
                                   std::numeric_limits<int32_t>::max(), std::numeric_limits<int64_t>::max()};
  return values[rng() % (sizeof values / sizeof values[0])];
}

struct FieldRef {
  google::protobuf::Message* message;
  const google::protobuf::FieldDescriptor* field;
  int index;  // -1 for singular
};

void collect_fields(google::protobuf::Message* m, std::vector<FieldRef>& out) {
  const auto* d = m->GetDescriptor();
  const auto* r = m->GetReflection();
  for (int i = 0; i < d->field_count(); ++i) {
    const auto* f = d->field(i);
    if (f->is_repeated()) {
      const int n = r->FieldSize(*m, f);
      for (int k = 0; k < n; ++k) {
        if (f->cpp_type() == google::protobuf::FieldDescriptor::CPPTYPE_MESSAGE) {
          collect_fields(r->MutableRepeatedMessage(m, f, k), out);
        }
        out.push_back({m, f, k});
      }
    } else if (f->cpp_type() == google::protobuf::FieldDescriptor::CPPTYPE_MESSAGE) {
      if (r->HasField(*m, f)) collect_fields(r->MutableMessage(m, f), out);
    } else {
      out.push_back({m, f, -1});
    }
  }
}

void corrupt(const FieldRef& ref, std::mt19937_64& rng) {
  using FD = google::protobuf::FieldDescriptor;
  auto* m = ref.message;
  const auto* r = m->GetReflection();
  const auto* f = ref.field;
  if (ref.index >= 0 && rng() % 4 == 0) {  // drop an element of a repeated field
    const int n = r->FieldSize(*m, f);
    r->SwapElements(m, f, ref.index, n - 1);
    r->RemoveLast(m, f);
    return;
  }
  const int64_t v = interesting_value(rng);
  const bool rep = ref.index >= 0;
  switch (f->cpp_type()) {
    case FD::CPPTYPE_INT32: {
      const auto x = static_cast<int32_t>(std::clamp<int64_t>(v, INT32_MIN, INT32_MAX));
      rep ? r->SetRepeatedInt32(m, f, ref.index, x) : r->SetInt32(m, f, x);
      break;
    }
    case FD::CPPTYPE_INT64:
      rep ? r->SetRepeatedInt64(m, f, ref.index, v) : r->SetInt64(m, f, v);
      break;
    case FD::CPPTYPE_DOUBLE: {
      const double choices[] = {-1.0, 0.0, 0.5, 3.0, 1e300, std::numeric_limits<double>::quiet_NaN(),
                                std::numeric_limits<double>::infinity()};
      const double x = choices[rng() % 7];
      rep ? r->SetRepeatedDouble(m, f, ref.index, x) : r->SetDouble(m, f, x);
      break;
    }
    case FD::CPPTYPE_ENUM: {
      const int x = static_cast<int>(std::clamp<int64_t>(v, -3, 40));
      rep ? r->SetRepeatedEnumValue(m, f, ref.index, x) : r->SetEnumValue(m, f, x);
      break;
    }
    case FD::CPPTYPE_BOOL:
      if (!rep) r->SetBool(m, f, !r->GetBool(*m, f));
      break;
    case FD::CPPTYPE_MESSAGE:
      if (rep) r->SwapElements(m, f, ref.index, static_cast<int>(rng() % static_cast<uint64_t>(r->FieldSize(*m, f))));
      break;
    default:
      break;
  }
}

// A corrupted program is either rejected by validation, or it runs to an end,
// a deadlock or a communication mismatch: never a crash, a hang or another
// exception type.
TEST(ValidateProperty, RandomCorruptionsAreRejectedOrRunSafely) {
  int rejected = 0, ran = 0, failed_at_run = 0;
  for (uint64_t seed = 1; seed <= 1500; ++seed) {
    std::mt19937_64 rng(seed);
    ir::Program p = small_program();
    const int mutations = 1 + static_cast<int>(rng() % 3);
    for (int i = 0; i < mutations; ++i) {
      std::vector<FieldRef> fields;
      collect_fields(&p, fields);
      corrupt(fields[rng() % fields.size()], rng);
    }
    ClosedFormCost cost;
    for (bool fold : {false, true}) {
      try {
        Simulator sim(p, cost, SimulationOptions{fold});
        const SimulationResult r = sim.run();
        EXPECT_GE(r.end_time, TimeNs::zero());
        ++ran;
      } catch (const DeadlockError& e) {
        EXPECT_FALSE(e.blocked().empty());
        ++failed_at_run;
      } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()), "");
        ++rejected;
      }
    }
  }
  // The corruptions must exercise both outcomes.
  EXPECT_GT(rejected, 100);
  EXPECT_GT(ran + failed_at_run, 100);
}

TEST(ValidateProgram, RejectsAProgramWithoutRanks) {
  const ir::Program empty;
  try {
    ir::validate_program(empty, "junk.pb");
    FAIL() << "an empty program validated";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), ::testing::HasSubstr("junk.pb"));
    EXPECT_THAT(e.what(), ::testing::HasSubstr("no ranks"));
  }
}

}  // namespace
}  // namespace lacuna::engine
