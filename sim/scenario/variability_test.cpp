// The variability section: preset defaults, `ideal`, validation located at
// the field, and the command-line edits (--set, --ideal, --seed,
// --straggler, --slow-link) checked like the file with errors naming the flag.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "sim/scenario/edits.h"
#include "sim/scenario/test_support.h"
#include "sim/scenario/variability.h"
#include "sim/core/option_text.h"

namespace lacuna::scenario {
namespace {

using ::testing::HasSubstr;
using testing::line_of;
using testing::read_source;

const std::string kSmall = "scenarios/llm/gpt-1.3b-8gpu.pbtxt";  // 1 node of 8 H100
const std::string kGpt3 = "scenarios/llm/gpt3-175b-3072.pbtxt";   // 384 nodes
const std::string kNoPreset = "scenarios/hardware/h100-node-no-preset.pbtxt";

LoadedScenario load(const std::string& text, const ScenarioEdits& edits = {}) {
  return parse_scenario(text, Format::kText, "s.pbtxt", 1, edits);
}

Error error_of(const std::string& text, const ScenarioEdits& edits = {}) {
  try {
    load(text, edits);
  } catch (const Error& e) {
    return e;
  }
  ADD_FAILURE() << "no error";
  return Error("no error");
}

TEST(Variability, HardwarePresetGivesTheSourcedDefaults) {
  const Variability v = load(read_source(kSmall)).spec.variability();
  EXPECT_DOUBLE_EQ(v.gpu_speed_cv(), 0.005);  // docs/variability-sources.md §2
  EXPECT_EQ(v.seed(), 0);
  EXPECT_DOUBLE_EQ(v.stragglers().slowdown(), 1.10);
  EXPECT_DOUBLE_EQ(v.stragglers().host_fraction(), 0);
  EXPECT_DOUBLE_EQ(v.host_pauses().duration_ms(), 300);
  EXPECT_EQ(v.host_pauses().interval_iterations(), 0);
  EXPECT_DOUBLE_EQ(v.link_flaps().duration_s(), 3);
  EXPECT_DOUBLE_EQ(v.link_flaps().flaps_per_port_per_hour(), 0);
  EXPECT_EQ(v.kernel_noise_size(), 0);
  EXPECT_TRUE(any_variability(v));
  EXPECT_FALSE(any_kernel_noise(v) || any_host_pauses(v) || any_link_variability(v));
  // Every preset has the same defaults; none without a preset.
  for (const std::string& name : hardware_preset_names()) EXPECT_DOUBLE_EQ(variability_preset(name).gpu_speed_cv(), 0.005);
  EXPECT_FALSE(any_variability(load(read_source(kNoPreset)).spec.variability()));
}

TEST(Variability, ScenarioFieldsOverrideThePresetAndIdealTurnsItOff) {
  const std::string base = read_source(kSmall);
  const Variability v = load(base + "variability { seed: 7 stragglers { host_fraction: 0.5 } gpu_speed_cv: 0 }")
                            .spec.variability();
  EXPECT_EQ(v.seed(), 7);
  EXPECT_DOUBLE_EQ(v.gpu_speed_cv(), 0);  // set to 0: present, overrides 0.005
  EXPECT_DOUBLE_EQ(v.stragglers().host_fraction(), 0.5);
  EXPECT_DOUBLE_EQ(v.stragglers().slowdown(), 1.10);  // from the preset
  const Variability ideal = load(base + "variability { ideal: true }").spec.variability();
  EXPECT_FALSE(any_variability(ideal));
  EXPECT_DOUBLE_EQ(ideal.stragglers().slowdown(), 0);
  // Resolution is idempotent.
  const Variability again = resolve_variability(v, "h100-sxm");
  EXPECT_EQ(again.SerializeAsString(), v.SerializeAsString());
}

struct Bad {
  std::string name;
  std::string section;  // appended to the small scenario
  std::string field;
  std::string message;
  std::string located;  // text of the line the error points at
};

void PrintTo(const Bad& b, std::ostream* os) { *os << b.name; }

class VariabilityRule : public ::testing::TestWithParam<Bad> {};

TEST_P(VariabilityRule, ReportsFieldMessageAndLine) {
  const Bad& b = GetParam();
  const std::string text = read_source(kSmall) + b.section;
  const Error e = error_of(text);
  EXPECT_EQ(e.where().field, b.field) << e.what();
  EXPECT_THAT(e.problem(), HasSubstr(b.message)) << e.what();
  EXPECT_EQ(e.where().file, "s.pbtxt");
  EXPECT_EQ(e.where().line, line_of(text, b.located)) << e.what();
  EXPECT_FALSE(e.fix().empty()) << e.what();
}

const Bad kBad[] = {
    {"negative_seed", "variability {\n  seed: -1\n}\n", "variability.seed", "must be ≥ 0", "seed: -1"},
    {"cv_negative", "variability {\n  gpu_speed_cv: -0.1\n}\n", "variability.gpu_speed_cv", "must be ≥ 0",
     "gpu_speed_cv"},
    {"noise_class", "variability {\n  kernel_noise { key: \"GEM\" value { cv: 0.02 } }\n}\n",
     "variability.kernel_noise[GEM]", "unknown op class \"GEM\"", "kernel_noise"},
    {"tail_without_shape", "variability {\n  kernel_noise { key: \"DEFAULT\" value { tail_probability: 0.01 } }\n}\n",
     "variability.kernel_noise[DEFAULT].tail_alpha", "is not set", "kernel_noise"},
    {"straggler_node", "variability {\n  stragglers {\n    hosts { node: 3 factor: 1.1 }\n  }\n}\n",
     "variability.stragglers.hosts[0].node", "node 3 is outside the cluster (1 nodes)", "hosts {"},
    {"straggler_faster", "variability {\n  stragglers {\n    hosts { node: 0 factor: 0.9 }\n  }\n}\n",
     "variability.stragglers.hosts[0].factor", "must be ≥ 1", "hosts {"},
    {"straggler_fraction", "variability {\n  stragglers {\n    host_fraction: 1.5\n  }\n}\n",
     "variability.stragglers.host_fraction", "above the supported maximum", "host_fraction"},
    {"slow_link_port", "variability {\n  slow_links {\n    node: 0 index: 1 bandwidth_factor: 0.5\n  }\n}\n",
     "variability.slow_links[0].port", "is not set", "slow_links {"},
    {"slow_link_nic", "variability {\n  slow_links {\n    node: 0 port: PORT_NIC index: 8 bandwidth_factor: 0.5\n  }\n}\n",
     "variability.slow_links[0].index", "NIC 8 does not exist (8 per node)", "port: PORT_NIC index: 8"},
    {"slow_link_factor", "variability {\n  slow_links {\n    node: 0 port: PORT_NVLINK index: 1 bandwidth_factor: 0\n  }\n}\n",
     "variability.slow_links[0].bandwidth_factor", "must be in (0, 1]", "port: PORT_NVLINK index: 1"},
    {"flap_factor", "variability {\n  link_flaps {\n    bandwidth_factor: 1\n  }\n}\n",
     "variability.link_flaps.bandwidth_factor", "must be in [0, 1)", "bandwidth_factor"},
    {"pause_interval", "variability {\n  host_pauses {\n    interval_iterations: -3\n  }\n}\n",
     "variability.host_pauses.interval_iterations", "must be in [0, 10^9]", "interval_iterations"},
    {"skew", "variability {\n  collective_launch_skew_us: -1\n}\n", "variability.collective_launch_skew_us",
     "must be ≥ 0", "collective_launch_skew_us"},
};

INSTANTIATE_TEST_SUITE_P(All, VariabilityRule, ::testing::ValuesIn(kBad),
                         [](const auto& info) { return info.param.name; });

TEST(Variability, NoPresetWithIdealUnsetFieldsMeanOff) {
  // link_flaps with a rate but no duration and no preset to give one.
  const Error e = error_of(read_source(kSmall) + "variability {\n  ideal: true\n  link_flaps { flaps_per_port_per_hour: 1 }\n}\n");
  EXPECT_EQ(e.where().field, "variability.link_flaps.duration_s") << e.what();
}

// ---------------------------------------------------------------- edits

TEST(ScenarioEdits, SetChangesAnyFieldCheckedLikeTheFile) {
  ScenarioEdits e;
  e.set = {"cluster.nic.bandwidth_gb_per_s=25", "parallel.dp=2", "cluster.gpu.efficiency[GEMM].flops=0.5",
           "variability.kernel_noise[DEFAULT].cv=0.02", "schedule.kind=GPIPE", "name=\"edited run\""};
  const LoadedScenario s = load(read_source(kSmall), e);
  EXPECT_DOUBLE_EQ(s.spec.cluster().nic().bandwidth_gb_per_s(), 25);
  EXPECT_DOUBLE_EQ(s.spec.cluster().nic().latency_us(), 2.7) << "the rest of the NIC still from the preset";
  EXPECT_DOUBLE_EQ(s.spec.cluster().gpu().efficiency().at("GEMM").flops(), 0.5);
  EXPECT_DOUBLE_EQ(s.spec.variability().kernel_noise().at("DEFAULT").cv(), 0.02);
  EXPECT_EQ(s.spec.schedule().kind(), GPIPE);
  EXPECT_EQ(s.spec.name(), "edited run");
}

TEST(ScenarioEdits, RepeatedFieldsByIndexOrWholeList) {
  Scenario s;
  set_field(s, "parallel.layers_per_stage=4,4,8", "--set a");
  ASSERT_EQ(s.parallel().layers_per_stage_size(), 3);
  EXPECT_EQ(s.parallel().layers_per_stage(2), 8);
  set_field(s, "parallel.layers_per_stage[1]=6", "--set b");
  EXPECT_EQ(s.parallel().layers_per_stage(1), 6);
  EXPECT_EQ(s.parallel().layers_per_stage_size(), 3);
  set_field(s, "parallel.layers_per_stage[3]=2", "--set c");  // index = size appends
  EXPECT_EQ(s.parallel().layers_per_stage_size(), 4);
  set_field(s, "cluster.network.tiers[0].children=16", "--set d");
  set_field(s, "cluster.network.tiers[0].name=\"leaf\"", "--set e");
  ASSERT_EQ(s.cluster().network().tiers_size(), 1);
  EXPECT_EQ(s.cluster().network().tiers(0).children(), 16);
  set_field(s, "variability.stragglers={host_fraction: 0.01 hosts {node: 3 factor: 1.2}}", "--set f");
  EXPECT_EQ(s.variability().stragglers().hosts(0).node(), 3);
}

struct BadEdit {
  std::string name;
  ScenarioEdits edits;
  std::string flag;
  std::string field;
  std::string message;
};

void PrintTo(const BadEdit& b, std::ostream* os) { *os << b.name; }

class BadEdits : public ::testing::TestWithParam<BadEdit> {};

TEST_P(BadEdits, NameTheFlag) {
  const BadEdit& b = GetParam();
  const Error e = error_of(read_source(kSmall), b.edits);
  EXPECT_EQ(neutral_options(e.where().file), b.flag) << e.what();
  EXPECT_EQ(e.where().line, 0) << e.what();
  EXPECT_EQ(e.where().field, b.field) << e.what();
  EXPECT_THAT(e.problem(), HasSubstr(b.message)) << e.what();
}

ScenarioEdits set(std::string a) {
  ScenarioEdits e;
  e.set = {std::move(a)};
  return e;
}
ScenarioEdits straggler(std::string a) {
  ScenarioEdits e;
  e.stragglers = {std::move(a)};
  return e;
}
ScenarioEdits slow_link(std::string a) {
  ScenarioEdits e;
  e.slow_links = {std::move(a)};
  return e;
}

const BadEdit kBadEdits[] = {
    {"unknown_field", set("parallel.tpp=2"), "`set parallel.tpp=2`", "parallel.tpp", "ParallelPlan has no field \"tpp\""},
    {"not_a_number", set("parallel.dp=two"), "`set parallel.dp=two`", "parallel.dp", "cannot read \"two\""},
    {"bad_enum", set("schedule.kind=ZB"), "`set schedule.kind=ZB`", "schedule.kind", "cannot read \"ZB\""},
    {"no_equals", set("parallel.dp"), "`set parallel.dp`", "", "expected FIELD=VALUE"},
    {"scalar_is_not_message", set("parallel.dp.x=1"), "`set parallel.dp.x=1`", "parallel.dp", "is a value, not a message"},
    {"index_out_of_range", set("cluster.network.tiers[3].children=2"), "`set cluster.network.tiers[3].children=2`",
     "cluster.network.tiers", "has 0 entries"},
    // Validation of the edited value, at the flag.
    {"invalid_value", set("cluster.nic.bandwidth_gb_per_s=-5"), "`set cluster.nic.bandwidth_gb_per_s=-5`",
     "cluster.nic.bandwidth_gb_per_s", "must be > 0"},
    {"straggler_syntax", straggler("17:1.1"), "`straggler 17:1.1`", "", "expected host=NODE:FACTOR"},
    {"straggler_node", straggler("host=17:1.1"), "`straggler host=17:1.1`", "variability.stragglers.hosts[0].node",
     "node 17 is outside the cluster"},
    {"slow_link_syntax", slow_link("node=0,nic=1"), "`slow-link node=0,nic=1`", "", "expected a bandwidth factor"},
    {"slow_link_key", slow_link("node=0,port=1:0.5"), "`slow-link node=0,port=1:0.5`", "", "unknown key \"port\""},
    {"slow_link_range", slow_link("node=0,gpu=9:0.5"), "`slow-link node=0,gpu=9:0.5`", "variability.slow_links[0].index",
     "GPU 9 does not exist"},
};

INSTANTIATE_TEST_SUITE_P(All, BadEdits, ::testing::ValuesIn(kBadEdits), [](const auto& info) { return info.param.name; });

// A rule the edit breaks elsewhere in the scenario: located in the file, and
// the message says which flags were in force.
TEST(ScenarioEdits, ARuleBrokenElsewhereNamesTheFlagsInForce) {
  // micro_batch 3 is fine on its own; the file's global_batch (32) is then
  // not a multiple of micro_batch × dp = 6: reported at the file's line, with
  // the flag in force.
  const Error e = error_of(read_source(kSmall), set("training.micro_batch=3"));
  EXPECT_EQ(e.where().file, "s.pbtxt") << e.what();
  EXPECT_EQ(e.where().field, "training.global_batch") << e.what();
  EXPECT_THAT(neutral_options(e.problem()), HasSubstr("(with `set training.micro_batch=3`)")) << e.what();
  // A rule broken at the edited field itself is reported at the flag.
  const Error at_flag = error_of(read_source(kSmall), set("parallel.dp=4"));
  EXPECT_EQ(neutral_options(at_flag.where().file), "`set parallel.dp=4`") << at_flag.what();
  EXPECT_THAT(at_flag.problem(), HasSubstr("tp×cp×pp×dp = 16")) << at_flag.what();
}

TEST(ScenarioEdits, IdealSeedStragglersAndLinks) {
  ScenarioEdits e;
  e.ideal = true;
  e.seed = 42;
  e.stragglers = {"host=0:1.25"};
  e.slow_links = {"node=0,nic=3,dir=up:0.5", "host=0,gpu=2:0.25"};
  const Variability v = load(read_source(kSmall) + "variability { gpu_speed_cv: 0.1 }", e).spec.variability();
  EXPECT_TRUE(v.ideal());
  EXPECT_DOUBLE_EQ(v.gpu_speed_cv(), 0) << "--ideal clears the file's section and the preset's defaults";
  EXPECT_EQ(v.seed(), 42);
  ASSERT_EQ(v.stragglers().hosts_size(), 1);
  EXPECT_DOUBLE_EQ(v.stragglers().hosts(0).factor(), 1.25);
  ASSERT_EQ(v.slow_links_size(), 2);
  EXPECT_EQ(v.slow_links(0).port(), PORT_NIC);
  EXPECT_EQ(v.slow_links(0).index(), 3);
  EXPECT_EQ(v.slow_links(0).direction(), LINK_UP);
  EXPECT_EQ(v.slow_links(1).port(), PORT_NVLINK);
  EXPECT_EQ(v.slow_links(1).direction(), LINK_BOTH);
  // --ideal alone: nothing on.
  ScenarioEdits ideal;
  ideal.ideal = true;
  EXPECT_FALSE(any_variability(load(read_source(kGpt3), ideal).spec.variability()));
}

TEST(ScenarioEdits, CompiledProgramsTakeOnlyTheVariabilityFlags) {
  Variability v;
  SourceMap where;
  ScenarioEdits e = set("parallel.dp=2");
  EXPECT_THROW(apply_variability_edits(v, e, where), Error);
  ScenarioEdits ok;
  ok.seed = 3;
  ok.stragglers = {"host=1:1.5"};
  apply_variability_edits(v, ok, where);
  EXPECT_EQ(v.seed(), 3);
  EXPECT_EQ(v.stragglers().hosts(0).node(), 1);
}

}  // namespace
}  // namespace lacuna::scenario
