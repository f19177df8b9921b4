// The batch estimate (sim/run/batch_estimate.h): the items in flight are the
// `threads` largest, a kept program is not counted twice, the time spreads
// over processes × threads but never below the longest item, the refusal
// names the option, and kept compiles stay within their budget.
#include "sim/run/batch_estimate.h"

#include <gtest/gtest.h>

#include <random>

#include "sim/core/error.h"

namespace lacuna::run {
namespace {

ItemEstimate item(uint64_t events, int64_t program, int64_t run, double compile_s = 0, bool kept = false) {
  ItemEstimate e;
  e.compiled = true;
  e.events = events;
  e.program = Bytes(program);
  e.run = Bytes(run);
  e.compile_s = compile_s;
  e.kept = kept;
  return e;
}

TEST(BatchEstimate, TheRecordRoundTrips) {
  ItemEstimate e = item(123'456, 7'000, 9'000, 0.25, true);
  e.host_events = 42;
  const ItemEstimate back = decode_item_estimate(encode_item_estimate(e));
  EXPECT_TRUE(back.compiled);
  EXPECT_TRUE(back.kept);
  EXPECT_EQ(back.events, e.events);
  EXPECT_EQ(back.host_events, 42u);
  EXPECT_EQ(back.program, e.program);
  EXPECT_EQ(back.run, e.run);
  EXPECT_DOUBLE_EQ(back.compile_s, 0.25);
  EXPECT_THROW(decode_item_estimate("short"), InternalError);
}

TEST(BatchEstimate, InFlightIsTheLargestItemsAtOnce) {
  const std::vector<ItemEstimate> items = {item(10, 100, 1'000), item(10, 100, 5'000), item(10, 100, 3'000),
                                           item(10, 100, 2'000)};
  const BatchEstimate two = estimate_batch(items, items.size(), 1.0, 2, 1, NetworkMode::kFlow, false);
  EXPECT_EQ(two.in_flight, Bytes(5'100 + 3'100));
  EXPECT_EQ(two.largest, Bytes(5'100));
  EXPECT_EQ(two.events, 40u);
  const BatchEstimate many = estimate_batch(items, items.size(), 1.0, 16, 1, NetworkMode::kFlow, false);
  EXPECT_EQ(many.in_flight, Bytes(1'100 + 5'100 + 3'100 + 2'100)) << "more threads than items: all of them";
}

TEST(BatchEstimate, AKeptProgramIsAlreadyResident) {
  const BatchEstimate kept = estimate_batch({item(1, 700, 300, 2.0, true)}, 1, 1.0, 1, 1, NetworkMode::kFlow, false);
  const BatchEstimate not_kept = estimate_batch({item(1, 700, 300, 2.0, false)}, 1, 1.0, 1, 1, NetworkMode::kFlow, false);
  EXPECT_EQ(kept.in_flight, Bytes(300));
  EXPECT_EQ(not_kept.in_flight, Bytes(1'000));
  EXPECT_DOUBLE_EQ(kept.compile_s, 0.0) << "its compile is done";
  EXPECT_DOUBLE_EQ(not_kept.compile_s, 2.0) << "the run compiles it again";
  EXPECT_GT(not_kept.seconds, kept.seconds);
}

TEST(BatchEstimate, FailedItemsCountButAddNothing) {
  std::vector<ItemEstimate> items = {item(1'000, 10, 10), ItemEstimate{}};
  const BatchEstimate b = estimate_batch(items, items.size(), 1.0, 4, 1, NetworkMode::kAnalytic, false);
  EXPECT_EQ(b.items, 2u);
  EXPECT_EQ(b.failed, 1u);
  EXPECT_EQ(b.in_flight, Bytes(20));
  EXPECT_NE(describe_batch(b, "plans").find("(1 of them fail to compile)"), std::string::npos)
      << describe_batch(b, "plans");
}

// Random batches: the time is the total spread over the workers, bounded
// below by the longest item, and more workers never make it longer.
TEST(BatchEstimate, TimeSpreadsOverWorkersButNotBelowTheLongestItem) {
  std::mt19937_64 rng(7);
  for (int trial = 0; trial < 200; ++trial) {
    std::vector<ItemEstimate> items;
    const int n = 1 + static_cast<int>(rng() % 30);
    double total = 0, longest = 0;
    for (int i = 0; i < n; ++i) {
      const uint64_t events = rng() % 50'000'000;
      const double compile_s = static_cast<double>(rng() % 1000) / 1000;
      items.push_back(item(events, 1, 1, compile_s));
      const double s = static_cast<double>(events) / kFlowEventsPerSecond + compile_s;
      total += s;
      longest = std::max(longest, s);
    }
    const int threads = 1 + static_cast<int>(rng() % 8), processes = 1 + static_cast<int>(rng() % 4);
    const BatchEstimate b = estimate_batch(items, items.size(), 1.0, threads, processes, NetworkMode::kFlow, false);
    EXPECT_NEAR(b.seconds, std::max(longest, total / (threads * processes)), 1e-9 * (1 + total));
    EXPECT_GE(b.seconds + 1e-12, longest);
    const BatchEstimate more = estimate_batch(items, items.size(), 1.0, threads + 1, processes, NetworkMode::kFlow, false);
    EXPECT_LE(more.seconds, b.seconds + 1e-12);
    const BatchEstimate folded = estimate_batch(items, items.size(), 1.0, threads, processes, NetworkMode::kFlow, true);
    EXPECT_GE(folded.seconds + 1e-12, b.seconds) << "a folded run's setup weighs more per event";
  }
}

TEST(BatchEstimate, TheSampleIsTheTopOfEachProxyInIndexOrder) {
  const std::vector<double> events = {5, 1, 9, 9, 2, 0};
  const std::vector<double> gpus = {1, 8, 1, 1, 1, 1};
  EXPECT_EQ(estimate_sample({events}, 6, 2), (std::vector<size_t>{2, 3})) << "ties by index";
  EXPECT_EQ(estimate_sample({events, gpus}, 6, 2), (std::vector<size_t>{0, 1, 2, 3}));
  EXPECT_EQ(estimate_sample({events}, 6, 10).size(), 6u) << "a small batch is sampled whole";
  EXPECT_TRUE(estimate_sample({std::vector<double>{}}, 0, 2).empty());
  EXPECT_THROW(estimate_sample({gpus}, 5, 2), InternalError);
}

// A sample of a batch of identical items scaled by the proxy gives what the
// whole batch, every item compiled, would: events, time and memory alike.
TEST(BatchEstimate, AScaledSampleOfIdenticalItemsEqualsTheWholeBatch) {
  const ItemEstimate one = item(1'000'000, 5'000, 20'000, 0.2);
  ItemEstimate kept = one;
  kept.kept = true;
  const std::vector<ItemEstimate> whole(10, one);
  std::vector<ItemEstimate> all_but_two_kept = whole;
  all_but_two_kept[0].kept = all_but_two_kept[1].kept = true;
  const BatchEstimate exact = estimate_batch(all_but_two_kept, 10, 1.0, 2, 1, NetworkMode::kFlow, true);
  const BatchEstimate scaled = estimate_batch({kept, kept}, 10, 5.0, 2, 1, NetworkMode::kFlow, true);
  EXPECT_EQ(scaled.events, exact.events);
  EXPECT_NEAR(scaled.seconds, exact.seconds, 1e-9);
  EXPECT_NEAR(scaled.compile_s, exact.compile_s, 1e-9);
  EXPECT_EQ(scaled.in_flight, Bytes(2 * 20'000)) << "the sample is kept: only its runs are to come";
  EXPECT_EQ(scaled.sampled, 2u);
  EXPECT_NE(describe_batch(scaled, "plans").find("10 plans (2 compiled for the estimate): 10.000 M events"),
            std::string::npos)
      << describe_batch(scaled, "plans");
}

TEST(BatchEstimate, TheRootScalesTheSampleByItsShareOfTheProxy) {
  const std::vector<std::string> records = {encode_item_estimate(item(300, 1, 1)),
                                            encode_item_estimate(item(100, 1, 1))};
  // The sample (items 1 and 3) holds 4 of the proxy's 10: the batch is 2.5 times it.
  const BatchEstimate b =
      estimate_sampled_batch(records, {1, 3}, {1, 3, 2, 1, 3}, 2, 1, NetworkMode::kAnalytic, false);
  EXPECT_EQ(b.items, 5u);
  EXPECT_EQ(b.sampled, 2u);
  EXPECT_EQ(b.events, 1'000u);
  EXPECT_THROW(estimate_sampled_batch(records, {1}, {1, 3}, 2, 1, NetworkMode::kAnalytic, false), InternalError);
}

TEST(BatchEstimate, ABatchOverTheLimitIsRefusedByName) {
  const BatchEstimate b = estimate_batch({item(1, 1'000, 4'000), item(1, 1'000, 2'000)}, 2, 1.0, 2, 1, NetworkMode::kFlow, false);
  const Bytes resident(10'000);
  EXPECT_NO_THROW(check_batch_memory(b, resident, Bytes::zero(), "--max-memory-gb", "points", "fewer points"))
      << "0: no limit";
  EXPECT_NO_THROW(check_batch_memory(b, resident, Bytes(10'000 + 8'000), "--max-memory-gb", "points", "fewer points"));
  try {
    check_batch_memory(b, resident, Bytes(10'000 + 8'000 - 1), "--max-memory-gb", "points", "fewer points");
    FAIL() << "one byte over the limit must be refused";
  } catch (const Error& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("--max-memory-gb"), std::string::npos) << m;
    EXPECT_NE(m.find("2 points in flight at once"), std::string::npos) << m;
    EXPECT_NE(m.find("fewer points"), std::string::npos) << m;
    EXPECT_NE(m.find("`j`"), std::string::npos) << m;
  }
}

TEST(PreparedSlots, KeepsWithinItsBudgetAndGivesEachSlotOnce) {
  PreparedSlots<int> slots(3, Bytes(100));
  EXPECT_TRUE(slots.keep(0, std::make_unique<int>(7), Bytes(60)));
  EXPECT_FALSE(slots.keep(1, std::make_unique<int>(8), Bytes(41))) << "over the budget: compiled again at run time";
  EXPECT_TRUE(slots.keep(2, std::make_unique<int>(9), Bytes(40)));
  EXPECT_EQ(*slots.take(0), 7);
  EXPECT_EQ(slots.take(0), nullptr) << "taken once";
  EXPECT_EQ(slots.take(1), nullptr);
  EXPECT_EQ(*slots.take(2), 9);
}

TEST(PreparedSlots, TheBudgetIsAQuarterOfTheLimit) {
  EXPECT_EQ(prepared_budget(Bytes(4'000)), Bytes(1'000));
  EXPECT_EQ(prepared_budget(Bytes::zero()), Bytes(default_memory_limit().count() / 4)) << "no limit: the default's";
}

}  // namespace
}  // namespace lacuna::run
