#include "sim/sweep/sweep_grid.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "sim/core/error.h"
#include "sim/scenario/edits.h"

namespace lacuna::sweep {
namespace {

using Strings = std::vector<std::string>;

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "no error";
}

TEST(SweepGridTest, SplitsAtTopLevelCommasOnly) {
  EXPECT_EQ(split_values("1,2,4", "f"), (Strings{"1", "2", "4"}));
  EXPECT_EQ(split_values("{tp: 2, pp: 4},{tp: 8}", "f"), (Strings{"{tp: 2, pp: 4}", "{tp: 8}"}));
  EXPECT_EQ(split_values("[1,2],[3]", "f"), (Strings{"[1,2]", "[3]"}));
  EXPECT_EQ(split_values("\"a,b\",\"c\\\",d\"", "f"), (Strings{"\"a,b\"", "\"c\\\",d\""}));
  EXPECT_EQ(split_values("<a: 1, b: 2>,x", "f"), (Strings{"<a: 1, b: 2>", "x"}));
  EXPECT_EQ(split_values("7", "f"), (Strings{"7"}));
}

TEST(SweepGridTest, UnbalancedListsAreErrors) {
  EXPECT_NE(error_of([] { split_values("{a: 1", "--set x={a: 1"); }).find("--set x={a: 1: unclosed"),
            std::string::npos);
  EXPECT_NE(error_of([] { split_values("1],2", "f"); }).find("unbalanced ']'"), std::string::npos);
  EXPECT_NE(error_of([] { split_values("\"abc", "f"); }).find("unterminated"), std::string::npos);
}

TEST(SweepGridTest, CartesianProductWithTheLastFieldFastest) {
  const Grid g = make_grid({"parallel.tp=1,2", "parallel.pp=1,2,4"}, false);
  ASSERT_EQ(g.size(), 6u);
  EXPECT_EQ(g.assignments(0), (Strings{"parallel.tp=1", "parallel.pp=1"}));
  EXPECT_EQ(g.assignments(1), (Strings{"parallel.tp=1", "parallel.pp=2"}));
  EXPECT_EQ(g.assignments(2), (Strings{"parallel.tp=1", "parallel.pp=4"}));
  EXPECT_EQ(g.assignments(3), (Strings{"parallel.tp=2", "parallel.pp=1"}));
  EXPECT_EQ(g.assignments(5), (Strings{"parallel.tp=2", "parallel.pp=4"}));
  EXPECT_EQ(g.describe(4), "parallel.tp=2, parallel.pp=2");
  EXPECT_EQ(g.value_indices(4), (std::vector<size_t>{1, 1}));
}

TEST(SweepGridTest, ZipAdvancesTheListsTogether) {
  const Grid g = make_grid({"cluster.num_nodes=1,2,4", "training.global_batch=16,32,64"}, true);
  ASSERT_EQ(g.size(), 3u);
  EXPECT_EQ(g.assignments(1), (Strings{"cluster.num_nodes=2", "training.global_batch=32"}));
  EXPECT_EQ(g.describe(2), "cluster.num_nodes=4, training.global_batch=64");
  // A single value is held fixed.
  const Grid fixed = make_grid({"parallel.pp=8", "cluster.num_nodes=1,2"}, true);
  ASSERT_EQ(fixed.size(), 2u);
  EXPECT_EQ(fixed.assignments(1), (Strings{"parallel.pp=8", "cluster.num_nodes=2"}));
}

TEST(SweepGridTest, BracketedValueIsAListForARepeatedField) {
  const Grid g = make_grid({"parallel.layers_per_stage=[10,14],[12,12]"}, false);
  ASSERT_EQ(g.size(), 2u);
  EXPECT_EQ(g.assignments(0), (Strings{"parallel.layers_per_stage=10,14"}));
  EXPECT_EQ(g.describe(1), "parallel.layers_per_stage=[12,12]");
}

TEST(SweepGridTest, BadFlagsAreErrorsNamingThem) {
  EXPECT_NE(error_of([] { make_grid({"parallel.tp"}, false); }).find("`set parallel.tp`: expected FIELD=V1,V2"),
            std::string::npos);
  EXPECT_NE(error_of([] { make_grid({"parallel.tp="}, false); }).find("no values to sweep parallel.tp over"),
            std::string::npos);
  EXPECT_NE(error_of([] { make_grid({"parallel.tp=1,,2"}, false); }).find("value 2 of 3 is empty"), std::string::npos);
  EXPECT_NE(error_of([] { make_grid({"=1,2"}, false); }).find("no field before '='"), std::string::npos);
  EXPECT_NE(error_of([] { make_grid({}, false); }).find("nothing to sweep"), std::string::npos);
  EXPECT_NE(error_of([] {
              make_grid({"parallel.tp=1", "parallel.tp=2"}, false);
            }).find("is swept twice by `set`"),
            std::string::npos);
  const std::string zip = error_of([] { make_grid({"parallel.tp=1,2", "parallel.pp=1,2,4"}, true); });
  EXPECT_NE(zip.find("`zip`: "), std::string::npos) << zip;
  EXPECT_NE(zip.find("`set parallel.pp=1,2,4` has 3 values and `set parallel.tp=1,2` has 2"), std::string::npos) << zip;
}

TEST(SweepGridTest, TooManyPointsIsAnError) {
  const std::string many =
      "1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17,18,19,20,21,22,23,24,25,26,27,28,29,30,31,32,33,34,"
      "35,36,37,38,39,40,41,42,43,44,45,46,47";
  EXPECT_NE(error_of([&] {
              make_grid({"a=" + many, "b=" + many, "c=" + many}, false);
            }).find("more than 100000 points"),
            std::string::npos);
}

TEST(SweepGridTest, FieldsAndValuesAreCheckedOnTheParsedScenario) {
  scenario::Scenario raw;
  raw.mutable_parallel()->set_tp(2);
  EXPECT_NO_THROW(check_fields(make_grid({"parallel.tp=1,2", "schedule.kind=GPIPE,ONE_F_ONE_B"}, false), raw));
  const std::string unknown = error_of([&] { check_fields(make_grid({"parallel.tpp=1,2"}, false), raw); });
  EXPECT_NE(unknown.find("`set parallel.tpp=1,2`"), std::string::npos) << unknown;
  EXPECT_NE(unknown.find("has no field \"tpp\""), std::string::npos) << unknown;
  const std::string value = error_of([&] { check_fields(make_grid({"parallel.tp=1,two"}, false), raw); });
  EXPECT_NE(value.find("cannot read \"two\""), std::string::npos) << value;
}

}  // namespace
}  // namespace lacuna::sweep
