#include "runtime/communicator.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <functional>
#include <optional>
#include <random>
#include <string>
#include <thread>
#include <vector>

namespace lacuna::runtime {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;
using std::chrono::milliseconds;

// Runs fn(i) on one thread per i in [0, n); returns the CommError each threw.
// Any other exception fails the test.
std::vector<std::optional<CommError>> run_threads(int n, const std::function<void(int)>& fn) {
  std::vector<std::optional<CommError>> errors(n);
  std::vector<std::string> other(n);
  std::vector<std::thread> threads;
  for (int i = 0; i < n; ++i) {
    threads.emplace_back([&, i] {
      try {
        fn(i);
      } catch (const CommError& e) {
        errors[i] = e;
      } catch (const std::exception& e) {
        other[i] = e.what();
      }
    });
  }
  for (auto& t : threads) t.join();
  for (int i = 0; i < n; ++i) EXPECT_EQ(other[i], "") << "thread " << i;
  return errors;
}

void expect_no_errors(const std::vector<std::optional<CommError>>& errors) {
  for (std::size_t i = 0; i < errors.size(); ++i) {
    EXPECT_FALSE(errors[i].has_value()) << "thread " << i << ": " << errors[i]->what();
  }
}

// Non-zero small integers as floats: sums of a few of them are exact in any
// order, so ring results must equal the serial reference bit for bit.
std::vector<float> random_data(std::size_t n, std::uint32_t seed) {
  std::mt19937 gen(seed);
  std::uniform_int_distribution<int> dist(1, 100);
  std::bernoulli_distribution sign(0.5);
  std::vector<float> v(n);
  for (float& x : v) x = static_cast<float>(sign(gen) ? dist(gen) : -dist(gen));
  return v;
}

// A communicator with 2n ranks and one group of the n odd ranks (global rank
// != index in the group, which the algorithms must not confuse).
struct OddGroup {
  explicit OddGroup(int n, std::size_t chunk = std::size_t{1} << 16) : n(n) {
    std::vector<int> ranks;
    for (int i = 0; i < n; ++i) ranks.push_back(2 * i + 1);
    CommunicatorOptions opt;
    opt.timeout = milliseconds(20'000);
    opt.pipeline_chunk_elements = chunk;
    comm = std::make_unique<Communicator>(2 * n, std::vector<std::vector<int>>{ranks}, opt);
  }
  int rank(int i) const { return 2 * i + 1; }
  int n;
  std::unique_ptr<Communicator> comm;
};

const std::vector<std::size_t> kChunks = {std::size_t{1} << 16, 3};

// ------------------------------------------------------------------ numbers

TEST(CommunicatorCollectives, AllReduceMatchesSerialReference) {
  for (std::size_t chunk : kChunks) {
    for (int n = 1; n <= 8; ++n) {
      for (std::size_t count : {std::size_t{0}, std::size_t{1}, std::size_t{7}, std::size_t(3 * n + 2),
                                std::size_t{1000}, std::size_t{4099}}) {
        OddGroup g(n, chunk);
        std::vector<std::vector<float>> data(n);
        std::vector<float> expected(count, 0.0f);
        for (int i = 0; i < n; ++i) {
          data[i] = random_data(count, 1000 * n + 10 * i + static_cast<std::uint32_t>(count));
          for (std::size_t j = 0; j < count; ++j) expected[j] += data[i][j];
        }
        expect_no_errors(run_threads(n, [&](int i) { g.comm->all_reduce(g.rank(i), 0, data[i]); }));
        for (int i = 0; i < n; ++i) ASSERT_EQ(data[i], expected) << "n " << n << " count " << count << " member " << i;
      }
    }
  }
}

TEST(CommunicatorCollectives, AllGatherMatchesSerialReference) {
  for (int n = 1; n <= 8; ++n) {
    for (std::size_t m : {std::size_t{0}, std::size_t{1}, std::size_t{5}, std::size_t{37}, std::size_t{513}}) {
      OddGroup g(n);
      std::vector<std::vector<float>> in(n), out(n, std::vector<float>(n * m, 0.0f));
      std::vector<float> expected;
      for (int i = 0; i < n; ++i) {
        in[i] = random_data(m, 2000 * n + i + static_cast<std::uint32_t>(m));
        expected.insert(expected.end(), in[i].begin(), in[i].end());
      }
      expect_no_errors(run_threads(n, [&](int i) { g.comm->all_gather(g.rank(i), 0, in[i], out[i]); }));
      for (int i = 0; i < n; ++i) ASSERT_EQ(out[i], expected) << "n " << n << " m " << m << " member " << i;
    }
  }
}

TEST(CommunicatorCollectives, AllGatherInPlace) {
  for (int n = 1; n <= 8; ++n) {
    const std::size_t m = 11;
    OddGroup g(n);
    std::vector<float> expected = random_data(n * m, 77 + n);
    std::vector<std::vector<float>> buf(n, std::vector<float>(n * m, 0.0f));
    for (int i = 0; i < n; ++i) std::copy_n(expected.begin() + i * m, m, buf[i].begin() + i * m);
    expect_no_errors(run_threads(n, [&](int i) {
      std::span<float> out(buf[i]);
      g.comm->all_gather(g.rank(i), 0, out.subspan(i * m, m), out);
    }));
    for (int i = 0; i < n; ++i) ASSERT_EQ(buf[i], expected) << "n " << n << " member " << i;
  }
}

TEST(CommunicatorCollectives, ReduceScatterMatchesSerialReference) {
  for (int n = 1; n <= 8; ++n) {
    for (std::size_t m : {std::size_t{0}, std::size_t{1}, std::size_t{5}, std::size_t{37}, std::size_t{513}}) {
      OddGroup g(n);
      std::vector<std::vector<float>> in(n), out(n, std::vector<float>(m, 0.0f));
      std::vector<float> sum(n * m, 0.0f);
      for (int i = 0; i < n; ++i) {
        in[i] = random_data(n * m, 3000 * n + i + static_cast<std::uint32_t>(m));
        for (std::size_t j = 0; j < n * m; ++j) sum[j] += in[i][j];
      }
      expect_no_errors(run_threads(n, [&](int i) { g.comm->reduce_scatter(g.rank(i), 0, in[i], out[i]); }));
      for (int i = 0; i < n; ++i) {
        ASSERT_EQ(out[i], std::vector<float>(sum.begin() + i * m, sum.begin() + (i + 1) * m))
            << "n " << n << " m " << m << " member " << i;
      }
    }
  }
}

TEST(CommunicatorCollectives, ReduceScatterInPlace) {
  for (int n = 1; n <= 8; ++n) {
    const std::size_t m = 13;
    OddGroup g(n);
    std::vector<std::vector<float>> buf(n);
    std::vector<float> sum(n * m, 0.0f);
    for (int i = 0; i < n; ++i) {
      buf[i] = random_data(n * m, 99 + 10 * n + i);
      for (std::size_t j = 0; j < n * m; ++j) sum[j] += buf[i][j];
    }
    expect_no_errors(run_threads(n, [&](int i) {
      std::span<float> b(buf[i]);
      g.comm->reduce_scatter(g.rank(i), 0, b, b.subspan(i * m, m));
    }));
    for (int i = 0; i < n; ++i) {
      ASSERT_EQ(std::vector<float>(buf[i].begin() + i * m, buf[i].begin() + (i + 1) * m),
                std::vector<float>(sum.begin() + i * m, sum.begin() + (i + 1) * m))
          << "n " << n << " member " << i;
    }
  }
}

TEST(CommunicatorCollectives, AllToAllMatchesSerialReference) {
  for (int n = 1; n <= 8; ++n) {
    for (std::size_t b : {std::size_t{0}, std::size_t{1}, std::size_t{3}, std::size_t{17}, std::size_t{300}}) {
      OddGroup g(n);
      std::vector<std::vector<float>> in(n), out(n, std::vector<float>(n * b, 0.0f));
      for (int i = 0; i < n; ++i) in[i] = random_data(n * b, 4000 * n + i + static_cast<std::uint32_t>(b));
      expect_no_errors(run_threads(n, [&](int i) { g.comm->all_to_all(g.rank(i), 0, in[i], out[i]); }));
      for (int i = 0; i < n; ++i) {
        std::vector<float> expected;  // block j of member i's output = block i of member j's input
        for (int j = 0; j < n; ++j) expected.insert(expected.end(), in[j].begin() + i * b, in[j].begin() + (i + 1) * b);
        ASSERT_EQ(out[i], expected) << "n " << n << " block " << b << " member " << i;
      }
    }
  }
}

TEST(CommunicatorCollectives, BroadcastFromEveryRoot) {
  for (std::size_t chunk : kChunks) {
    for (int n = 1; n <= 8; ++n) {
      for (std::size_t count : {std::size_t{0}, std::size_t{1}, std::size_t{10}, std::size_t{1001}}) {
        for (int root = 0; root < n; ++root) {
          OddGroup g(n, chunk);
          std::vector<std::vector<float>> buf(n);
          for (int i = 0; i < n; ++i) buf[i] = random_data(count, 5000 * n + 100 * root + i);
          const std::vector<float> expected = buf[root];
          expect_no_errors(run_threads(n, [&](int i) { g.comm->broadcast(g.rank(i), 0, g.rank(root), buf[i]); }));
          for (int i = 0; i < n; ++i) {
            ASSERT_EQ(buf[i], expected) << "n " << n << " count " << count << " root " << root << " member " << i;
          }
        }
      }
    }
  }
}

TEST(CommunicatorCollectives, ReduceToEveryRoot) {
  for (std::size_t chunk : kChunks) {
    for (int n = 1; n <= 8; ++n) {
      for (std::size_t count : {std::size_t{1}, std::size_t{10}, std::size_t{1001}}) {
        for (int root = 0; root < n; ++root) {
          OddGroup g(n, chunk);
          std::vector<std::vector<float>> in(n);
          std::vector<float> expected(count, 0.0f), out(count, 0.0f);
          for (int i = 0; i < n; ++i) {
            in[i] = random_data(count, 6000 * n + 100 * root + i);
            for (std::size_t j = 0; j < count; ++j) expected[j] += in[i][j];
          }
          const std::vector<std::vector<float>> inputs = in;
          expect_no_errors(run_threads(n, [&](int i) {
            g.comm->reduce(g.rank(i), 0, g.rank(root), in[i], i == root ? std::span<float>(out) : std::span<float>());
          }));
          ASSERT_EQ(out, expected) << "n " << n << " count " << count << " root " << root;
          EXPECT_EQ(in, inputs) << "inputs must not change";
        }
      }
    }
  }
}

TEST(CommunicatorCollectives, AllReduceOfFractionalFloatsIsCloseToReference) {
  const int n = 5;
  const std::size_t count = 2048;
  OddGroup g(n);
  std::mt19937 gen(7);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<std::vector<float>> data(n, std::vector<float>(count));
  std::vector<double> expected(count, 0.0);
  for (int i = 0; i < n; ++i) {
    for (std::size_t j = 0; j < count; ++j) {
      data[i][j] = dist(gen);
      expected[j] += data[i][j];
    }
  }
  expect_no_errors(run_threads(n, [&](int i) { g.comm->all_reduce(g.rank(i), 0, data[i]); }));
  for (int i = 0; i < n; ++i) {
    for (std::size_t j = 0; j < count; ++j) ASSERT_NEAR(data[i][j], expected[j], 1e-5) << i << " " << j;
    EXPECT_EQ(data[i], data[0]) << "every member must hold the same bits";
  }
}

// Every kind in turn on one group, many times: members run ahead into the
// next instance while others still finish the previous one.
TEST(CommunicatorCollectives, MixedSequenceOnOneGroup) {
  const int n = 4;
  const std::size_t m = 24;
  OddGroup g(n, 5);
  const int iterations = 40;
  std::atomic<int> wrong{0};
  expect_no_errors(run_threads(n, [&](int i) {
    for (int it = 0; it < iterations; ++it) {
      const std::uint32_t seed = 100 * it;
      auto member_data = [&](int j, std::size_t len) { return random_data(len, seed + j); };
      std::vector<float> sum(n * m, 0.0f);
      for (int j = 0; j < n; ++j) {
        const auto d = member_data(j, n * m);
        for (std::size_t k = 0; k < n * m; ++k) sum[k] += d[k];
      }
      std::vector<float> a = member_data(i, n * m);
      g.comm->all_reduce(g.rank(i), 0, a);
      if (a != sum) ++wrong;
      std::vector<float> rs(m);
      g.comm->reduce_scatter(g.rank(i), 0, member_data(i, n * m), rs);
      if (rs != std::vector<float>(sum.begin() + i * m, sum.begin() + (i + 1) * m)) ++wrong;
      std::vector<float> ag(n * m);
      g.comm->all_gather(g.rank(i), 0, rs, ag);
      if (ag != sum) ++wrong;
      std::vector<float> bc = i == it % n ? sum : std::vector<float>(n * m, 0.0f);
      g.comm->broadcast(g.rank(i), 0, g.rank(it % n), bc);
      if (bc != sum) ++wrong;
      std::vector<float> tt(n * m);
      g.comm->all_to_all(g.rank(i), 0, member_data(i, n * m), tt);
      for (int j = 0; j < n; ++j) {
        const auto d = member_data(j, n * m);
        if (!std::equal(d.begin() + i * m, d.begin() + (i + 1) * m, tt.begin() + j * m)) ++wrong;
      }
    }
  }));
  EXPECT_EQ(wrong.load(), 0);
}

// ------------------------------------------------------------------ concurrency

TEST(CommunicatorConcurrency, DisjointGroupsRunAtTheSameTime) {
  Communicator comm(8, {{0, 1, 2, 3}, {4, 5, 6, 7}});
  const int iterations = 50;
  const std::size_t count = 777;
  std::atomic<int> wrong{0};
  expect_no_errors(run_threads(8, [&](int r) {
    const int group = r / 4;
    for (int it = 0; it < iterations; ++it) {
      std::vector<float> expected(count, 0.0f);
      for (int j = 0; j < 4; ++j) {
        const auto d = random_data(count, 10'000 * group + 10 * it + j);
        for (std::size_t k = 0; k < count; ++k) expected[k] += d[k];
      }
      std::vector<float> buf = random_data(count, 10'000 * group + 10 * it + r % 4);
      comm.all_reduce(r, group, buf);
      if (buf != expected) ++wrong;
    }
  }));
  EXPECT_EQ(wrong.load(), 0);
}

// Two streams per rank: one all-reduces over all four ranks (group 0), the
// other all-gathers in pairs {0,2} / {1,3} (groups 1, 2), concurrently.
TEST(CommunicatorConcurrency, OverlappingGroupsFromDifferentStreams) {
  Communicator comm(4, {{0, 1, 2, 3}, {0, 2}, {1, 3}});
  const int iterations = 40;
  const std::size_t count = 301, m = 64;
  std::atomic<int> wrong{0};
  expect_no_errors(run_threads(8, [&](int t) {
    const int rank = t % 4;
    if (t < 4) {
      for (int it = 0; it < iterations; ++it) {
        std::vector<float> expected(count, 0.0f);
        for (int j = 0; j < 4; ++j) {
          const auto d = random_data(count, 10 * it + j);
          for (std::size_t k = 0; k < count; ++k) expected[k] += d[k];
        }
        std::vector<float> buf = random_data(count, 10 * it + rank);
        comm.all_reduce(rank, 0, buf, "stream tp");
        if (buf != expected) ++wrong;
      }
    } else {
      const int group = 1 + rank % 2;
      const std::vector<int>& members = comm.group_ranks(group);
      for (int it = 0; it < iterations; ++it) {
        std::vector<float> out(2 * m);
        comm.all_gather(rank, group, random_data(m, 50'000 + 10 * it + rank), out, "stream dp");
        std::vector<float> expected = random_data(m, 50'000 + 10 * it + members[0]);
        const auto second = random_data(m, 50'000 + 10 * it + members[1]);
        expected.insert(expected.end(), second.begin(), second.end());
        if (out != expected) ++wrong;
      }
    }
  }));
  EXPECT_EQ(wrong.load(), 0);
  EXPECT_EQ(comm.waiting_calls(), 0);
}

// ------------------------------------------------------------------ point-to-point

// Rank 0 sends on channels 0 and 1 from two streams; rank 1 receives them from
// two streams, and sends back to rank 0 on channel 0 from a third.
TEST(CommunicatorP2P, MatchesInOrderPerChannel) {
  Communicator comm(2, {});
  const std::size_t len = 33;
  auto payload = [&](int src, int ch, int k) { return random_data(len, 1000 * src + 100 * ch + k); };
  std::vector<std::vector<float>> got_ch0(5, std::vector<float>(len)), got_ch1(3, std::vector<float>(len)),
      got_back(4, std::vector<float>(len));
  std::atomic<std::int64_t> received{0};
  expect_no_errors(run_threads(5, [&](int t) {
    switch (t) {
      case 0:
        for (int k = 0; k < 5; ++k) comm.send(0, 1, 0, k, payload(0, 0, k));
        break;
      case 1:
        for (int k = 0; k < 3; ++k) comm.send(0, 1, 1, 10 + k, payload(0, 1, k));
        break;
      case 2:
        for (int k = 0; k < 3; ++k) received += comm.recv(1, 0, 1, 10 + k, got_ch1[k]).bytes_received;
        break;
      case 3:
        for (int k = 0; k < 5; ++k) received += comm.recv(1, 0, 0, k, got_ch0[k]).bytes_received;
        for (int k = 0; k < 4; ++k) comm.send(1, 0, 0, 7, payload(1, 0, k));
        break;
      case 4:
        for (int k = 0; k < 4; ++k) comm.recv(0, 1, 0, 7, got_back[k]);
        break;
    }
  }));
  for (int k = 0; k < 5; ++k) EXPECT_EQ(got_ch0[k], payload(0, 0, k)) << k;
  for (int k = 0; k < 3; ++k) EXPECT_EQ(got_ch1[k], payload(0, 1, k)) << k;
  for (int k = 0; k < 4; ++k) EXPECT_EQ(got_back[k], payload(1, 0, k)) << k;
  EXPECT_EQ(received.load(), static_cast<std::int64_t>(8 * len * sizeof(float)));
  EXPECT_EQ(comm.total_bytes_moved(), static_cast<std::int64_t>(12 * len * sizeof(float)));
}

TEST(CommunicatorP2P, TagMismatchFailsBothSides) {
  Communicator comm(2, {});
  std::vector<float> data = random_data(4, 1), out(4);
  const auto errors = run_threads(2, [&](int t) {
    if (t == 0) comm.send(0, 1, 2, 5, data, "stream pp_send op 3");
    else comm.recv(1, 0, 2, 6, out, "stream pp_recv op 4");
  });
  for (int t = 0; t < 2; ++t) {
    ASSERT_TRUE(errors[t].has_value()) << t;
    EXPECT_EQ(errors[t]->kind(), CommError::Kind::kMismatch);
    const std::string what = errors[t]->what();
    EXPECT_THAT(what, HasSubstr("rank 0 send to rank 1 (channel 2, tag 5, 4 floats) [stream pp_send op 3]"));
    EXPECT_THAT(what, HasSubstr("rank 1 recv from rank 0 (channel 2, tag 6, 4 floats) [stream pp_recv op 4]"));
    EXPECT_THAT(what, HasSubstr("tags differ (5 vs 6)"));
  }
}

TEST(CommunicatorP2P, SizeMismatchFailsBothSides) {
  Communicator comm(2, {});
  std::vector<float> data = random_data(4, 1), out(5);
  const auto errors = run_threads(2, [&](int t) {
    if (t == 0) comm.send(0, 1, 0, 9, data);
    else comm.recv(1, 0, 0, 9, out);
  });
  for (int t = 0; t < 2; ++t) {
    ASSERT_TRUE(errors[t].has_value()) << t;
    EXPECT_EQ(errors[t]->kind(), CommError::Kind::kMismatch);
    EXPECT_THAT(std::string(errors[t]->what()), HasSubstr("sizes differ (4 vs 5 floats)"));
  }
}

// ------------------------------------------------------------------ deadlocks

CommunicatorOptions short_timeout() {
  CommunicatorOptions o;
  o.timeout = milliseconds(200);
  return o;
}

TEST(CommunicatorDeadlock, RecvWithoutSendTimesOutWithReport) {
  Communicator comm(3, {}, short_timeout());
  std::vector<float> out(16);
  const auto errors = run_threads(1, [&](int) { comm.recv(1, 0, 0, 17, out, "stream pp_recv op 2"); });
  ASSERT_TRUE(errors[0].has_value());
  EXPECT_EQ(errors[0]->kind(), CommError::Kind::kTimeout);
  const std::string what = errors[0]->what();
  EXPECT_THAT(what, HasSubstr("rank 1 waits in recv from rank 0 (channel 0, tag 17, 16 floats) "
                              "[stream pp_recv op 2] (transfer #0): no matching send posted by rank 0"));
  EXPECT_THAT(what, HasSubstr("ranks in no communicator call: 0, 2"));
  // The timeout aborted the communicator: everybody else stops too.
  EXPECT_TRUE(comm.aborted());
  try {
    std::vector<float> data(16);
    comm.send(0, 1, 0, 17, data);
    ADD_FAILURE() << "send after a timeout must throw";
  } catch (const CommError& e) {
    EXPECT_EQ(e.kind(), CommError::Kind::kAborted);
    EXPECT_THAT(std::string(e.what()), HasSubstr("no matching send posted by rank 0"));
  }
}

TEST(CommunicatorDeadlock, SendWithoutRecvTimesOut) {
  Communicator comm(2, {}, short_timeout());
  std::vector<float> data(3);
  const auto errors = run_threads(1, [&](int) { comm.send(0, 1, 4, 2, data); });
  ASSERT_TRUE(errors[0].has_value());
  EXPECT_EQ(errors[0]->kind(), CommError::Kind::kTimeout);
  EXPECT_THAT(std::string(errors[0]->what()),
              HasSubstr("rank 0 waits in send to rank 1 (channel 4, tag 2, 3 floats) (transfer #0): "
                        "no matching recv posted by rank 1"));
}

TEST(CommunicatorDeadlock, MissingMemberIsNamed) {
  Communicator comm(4, {{0, 1, 2}}, short_timeout());
  std::vector<std::vector<float>> buf(2, std::vector<float>(8, 1.0f));
  const auto errors = run_threads(2, [&](int r) { comm.all_reduce(r, 0, buf[r]); });
  int timeouts = 0;
  for (int r = 0; r < 2; ++r) {
    ASSERT_TRUE(errors[r].has_value()) << r;
    EXPECT_TRUE(errors[r]->kind() == CommError::Kind::kTimeout || errors[r]->kind() == CommError::Kind::kAborted);
    timeouts += errors[r]->kind() == CommError::Kind::kTimeout;
    const std::string what = errors[r]->what();
    EXPECT_THAT(what, HasSubstr("waits in all_reduce of 8 floats on group 0 [ranks 0-2] (collective #0): "
                                "2 of 3 members arrived; never arrived: rank 2"));
    EXPECT_THAT(what, HasSubstr("ranks in no communicator call: 2, 3"));
  }
  EXPECT_GE(timeouts, 1);
}

// Rank 0 all-reduces before it sends; rank 1 receives before it all-reduces.
TEST(CommunicatorDeadlock, CrossedCollectiveAndRecvAreBothReported) {
  Communicator comm(2, {{0, 1}}, short_timeout());
  const auto errors = run_threads(2, [&](int r) {
    std::vector<float> buf(4, 1.0f);
    if (r == 0) {
      comm.all_reduce(0, 0, buf, "stream dp op 0");
      comm.send(0, 1, 0, 1, buf);
    } else {
      comm.recv(1, 0, 0, 1, buf, "stream pp_recv op 0");
      comm.all_reduce(1, 0, buf);
    }
  });
  for (int r = 0; r < 2; ++r) {
    ASSERT_TRUE(errors[r].has_value()) << r;
    const std::string what = errors[r]->what();
    EXPECT_THAT(what, HasSubstr("rank 0 waits in all_reduce of 4 floats on group 0 [ranks 0, 1] (collective #0) "
                                "[stream dp op 0]: 1 of 2 members arrived; never arrived: rank 1"));
    EXPECT_THAT(what, HasSubstr("rank 1 waits in recv from rank 0 (channel 0, tag 1, 4 floats) "
                                "[stream pp_recv op 0] (transfer #0): no matching send posted by rank 0"));
    EXPECT_THAT(what, HasSubstr("ranks in no communicator call: none"));
  }
}

TEST(CommunicatorDeadlock, ReportListsAtMost64Calls) {
  CommunicatorOptions opt;
  opt.timeout = milliseconds(60'000);
  Communicator comm(71, {}, opt);
  std::string report;
  const auto errors = run_threads(71, [&](int r) {
    if (r < 70) {
      std::vector<float> out(1);
      comm.recv(r, 70, 0, 0, out);
    } else {
      while (comm.waiting_calls() < 70) std::this_thread::yield();
      report = comm.waiting_report();
      comm.abort("test over");
    }
  });
  EXPECT_THAT(report, HasSubstr("calls waiting in the communicator: 70"));
  EXPECT_THAT(report, HasSubstr("rank 63 waits in recv from rank 70"));
  EXPECT_THAT(report, Not(HasSubstr("rank 64 waits")));
  EXPECT_THAT(report, HasSubstr("... and 6 more"));
  EXPECT_THAT(report, HasSubstr("ranks in no communicator call: 70"));
  for (int r = 0; r < 70; ++r) ASSERT_TRUE(errors[r].has_value());
}

// ------------------------------------------------------------------ mismatches

std::vector<std::optional<CommError>> three_members(Communicator& comm, const std::function<void(int)>& call) {
  return run_threads(3, call);
}

void expect_mismatch_everywhere(const std::vector<std::optional<CommError>>& errors,
                                const std::vector<std::string>& parts) {
  for (std::size_t r = 0; r < errors.size(); ++r) {
    ASSERT_TRUE(errors[r].has_value()) << "rank " << r;
    EXPECT_EQ(errors[r]->kind(), CommError::Kind::kMismatch) << errors[r]->what();
    for (const std::string& p : parts) EXPECT_THAT(std::string(errors[r]->what()), HasSubstr(p)) << "rank " << r;
  }
}

TEST(CommunicatorMismatch, KindDiffersOnEveryMember) {
  Communicator comm(3, {{0, 1, 2}});
  const auto errors = three_members(comm, [&](int r) {
    std::vector<float> buf(16, 1.0f);
    if (r == 2) comm.broadcast(2, 0, 0, buf);
    else comm.all_reduce(r, 0, buf);
  });
  expect_mismatch_everywhere(errors, {"collective mismatch on group 0 [ranks 0-2], collective #0",
                                      "disagree on the kind", "all_reduce of 16 floats",
                                      "rank 2: broadcast of 16 floats from root 0"});
  // Every member consumed instance #0: the group is usable again.
  expect_no_errors(run_threads(3, [&](int r) {
    std::vector<float> buf(5, static_cast<float>(r + 1));
    comm.all_reduce(r, 0, buf);
    EXPECT_EQ(buf, std::vector<float>(5, 6.0f));
  }));
}

TEST(CommunicatorMismatch, SizeDiffersOnEveryMember) {
  Communicator comm(3, {{0, 1, 2}});
  const auto errors = three_members(comm, [&](int r) {
    std::vector<float> buf(r == 1 ? 8 : 16, 1.0f);
    comm.all_reduce(r, 0, buf, "op " + std::to_string(r));
  });
  expect_mismatch_everywhere(errors, {"group 0 [ranks 0-2]", "disagree on the element count",
                                      "rank 1: all_reduce of 8 floats [op 1]", "all_reduce of 16 floats"});
}

TEST(CommunicatorMismatch, RootDiffersOnEveryMember) {
  Communicator comm(3, {{0, 1, 2}});
  const auto errors = three_members(comm, [&](int r) {
    std::vector<float> buf(4, 1.0f);
    comm.broadcast(r, 0, r == 0 ? 1 : 0, buf);
  });
  expect_mismatch_everywhere(errors, {"disagree on the root", "rank 0: broadcast of 4 floats from root 1",
                                      "broadcast of 4 floats from root 0"});
}

TEST(CommunicatorMismatch, AllToAllThatDoesNotSplitFailsEveryMember) {
  Communicator comm(3, {{0, 1, 2}});
  const auto errors = three_members(comm, [&](int r) {
    std::vector<float> in(7, 1.0f), out(7);
    comm.all_to_all(r, 0, in, out);
  });
  expect_mismatch_everywhere(errors, {"invalid all_to_all on group 0 [ranks 0-2], collective #0",
                                      "input of 7 floats does not split into group size 3 equal blocks"});
}

TEST(CommunicatorMismatch, BadGatherAndScatterSizesFailEveryMember) {
  Communicator comm(3, {{0, 1, 2}});
  auto errors = three_members(comm, [&](int r) {
    std::vector<float> in(4, 1.0f), out(r == 0 ? 11 : 12);
    comm.all_gather(r, 0, in, out);
  });
  expect_mismatch_everywhere(errors, {"group 0 [ranks 0-2]"});
  for (const auto& e : errors) {
    // Either rank 0's own error or the count mismatch it causes, whichever
    // arrived first; both name rank 0's 11 floats.
    EXPECT_THAT(std::string(e->what()), HasSubstr("11"));
  }
  errors = three_members(comm, [&](int r) {
    std::vector<float> in(10, 1.0f), out(3);
    comm.reduce_scatter(r, 0, in, out);
  });
  expect_mismatch_everywhere(errors, {"invalid reduce_scatter", "input has 10 floats, expected group size 3 x output 3 = 9"});
}

TEST(CommunicatorMismatch, RootOutsideGroupFailsEveryMember) {
  Communicator comm(4, {{0, 1, 2}});
  const auto errors = three_members(comm, [&](int r) {
    std::vector<float> buf(4, 1.0f);
    comm.broadcast(r, 0, 3, buf);
  });
  expect_mismatch_everywhere(errors, {"root rank 3 is not a member of the group"});
}

TEST(CommunicatorMismatch, InvalidCallsThrowAtOnce) {
  Communicator comm(4, {{0, 1, 2}});
  std::vector<float> buf(4);
  auto kind_of = [](const std::function<void()>& f) {
    try {
      f();
    } catch (const CommError& e) {
      return e.kind();
    }
    return CommError::Kind::kTimeout;  // "did not throw"
  };
  EXPECT_EQ(kind_of([&] { comm.all_reduce(3, 0, buf); }), CommError::Kind::kInvalidArgument);
  EXPECT_EQ(kind_of([&] { comm.all_reduce(0, 1, buf); }), CommError::Kind::kInvalidArgument);
  EXPECT_EQ(kind_of([&] { comm.all_reduce(7, 0, buf); }), CommError::Kind::kInvalidArgument);
  EXPECT_EQ(kind_of([&] { comm.send(0, 4, 0, 0, buf); }), CommError::Kind::kInvalidArgument);
  EXPECT_EQ(kind_of([&] { comm.recv(0, 1, -1, 0, buf); }), CommError::Kind::kInvalidArgument);
  EXPECT_THROW(Communicator(4, {{0, 2, 1}}), CommError);
  EXPECT_THROW(Communicator(4, {{0, 4}}), CommError);
  EXPECT_THROW(Communicator(4, {{}}), CommError);
  EXPECT_THROW(Communicator(0, {}), CommError);
}

// ------------------------------------------------------------------ abort

TEST(CommunicatorAbort, WakesEveryWaiter) {
  CommunicatorOptions opt;
  opt.timeout = milliseconds(60'000);  // far longer than the test: only abort can end the waits
  Communicator comm(4, {{0, 1}}, opt);
  std::atomic<bool> aborted_by_main{false};
  const auto errors = run_threads(4, [&](int t) {
    std::vector<float> buf(8, 1.0f);
    if (t == 0) {
      comm.all_reduce(0, 0, buf);  // rank 1 never comes
    } else if (t == 1) {
      comm.recv(2, 3, 0, 0, buf);  // rank 3 sends on channel 1 instead
    } else if (t == 2) {
      comm.send(3, 2, 1, 0, buf);
    } else {
      while (comm.waiting_calls() < 3) std::this_thread::yield();
      aborted_by_main = true;
      comm.abort("rank 1 failed: boom");
    }
  });
  ASSERT_TRUE(aborted_by_main.load());
  for (int t = 0; t < 3; ++t) {
    ASSERT_TRUE(errors[t].has_value()) << t;
    EXPECT_EQ(errors[t]->kind(), CommError::Kind::kAborted);
    EXPECT_THAT(std::string(errors[t]->what()), HasSubstr("communicator aborted while rank"));
    EXPECT_THAT(std::string(errors[t]->what()), HasSubstr("rank 1 failed: boom"));
  }
  EXPECT_FALSE(errors[3].has_value());
  EXPECT_TRUE(comm.aborted());
  EXPECT_EQ(comm.abort_reason(), "rank 1 failed: boom");
  comm.abort("second reason is ignored");
  EXPECT_EQ(comm.abort_reason(), "rank 1 failed: boom");
  EXPECT_EQ(comm.waiting_calls(), 0);
  std::vector<float> buf(8);
  EXPECT_THROW(comm.all_reduce(1, 0, buf), CommError);
  EXPECT_THROW(comm.send(3, 2, 0, 0, buf), CommError);
}

// ------------------------------------------------------------------ stats

TEST(CommunicatorStats, BytesMovedFollowTheAlgorithms) {
  for (int n : {1, 2, 4, 7}) {
    OddGroup g(n);
    const std::size_t count = 1000, m = 30;
    std::vector<CallStats> ar(n), ag(n);
    run_threads(n, [&](int i) {
      std::vector<float> buf = random_data(count, i);
      ar[i] = g.comm->all_reduce(g.rank(i), 0, buf);
      std::vector<float> out(n * m);
      ag[i] = g.comm->all_gather(g.rank(i), 0, random_data(m, i), out);
    });
    std::int64_t ar_in = 0, ag_in = 0;
    for (int i = 0; i < n; ++i) {
      EXPECT_EQ(ar[i].size_bytes, static_cast<std::int64_t>(count * sizeof(float)));
      EXPECT_EQ(ag[i].size_bytes, static_cast<std::int64_t>(n * m * sizeof(float)));
      ar_in += ar[i].bytes_received;
      ag_in += ag[i].bytes_received;
    }
    // Ring all-reduce: every chunk is read by n-1 members in each half.
    EXPECT_EQ(ar_in, static_cast<std::int64_t>(2 * (n - 1) * count * sizeof(float))) << n;
    EXPECT_EQ(ag_in, static_cast<std::int64_t>(n * (n - 1) * m * sizeof(float))) << n;
    EXPECT_EQ(g.comm->total_bytes_moved(), ar_in + ag_in);
  }
}


// ------------------------------------------------------------------ started

// CallStats::started is the executor's span start: when the data began to
// move. The late member first waits until the others are inside the
// communicator (no sleep as synchronisation), then sleeps 50 ms so that the
// gap between their call and the start has a guaranteed lower bound.

TEST(CommunicatorStarted, CollectiveStartsWhenTheLastMemberArrives) {
  using Clock = std::chrono::steady_clock;
  for (int n : {1, 2, 3}) {
    SCOPED_TRACE("group of " + std::to_string(n));
    OddGroup g(n);
    std::vector<Clock::time_point> called(n), returned(n);
    std::vector<CallStats> stats(n);
    const int late = n - 1;
    expect_no_errors(run_threads(n, [&](int i) {
      std::vector<float> buf(64, 1.0f);
      if (i == late) {
        while (g.comm->waiting_calls() < n - 1) std::this_thread::yield();
        std::this_thread::sleep_for(milliseconds(50));
      }
      called[i] = Clock::now();
      stats[i] = g.comm->all_reduce(g.rank(i), 0, buf, "stream tp op 0");
      returned[i] = Clock::now();
    }));
    for (int i = 0; i < n; ++i) {
      SCOPED_TRACE("member " + std::to_string(i));
      // One instance, one start shared by every member.
      EXPECT_EQ(stats[i].started, stats[0].started);
      EXPECT_GE(stats[i].started, called[late]);
      EXPECT_LE(stats[i].started, returned[i]);
      // The members on time waited for the late one: not part of the transfer.
      if (i != late) {
        EXPECT_GE(stats[i].started - called[i], milliseconds(50));
      }
    }
  }
}

TEST(CommunicatorStarted, EachCollectiveInstanceHasItsOwnStart) {
  using Clock = std::chrono::steady_clock;
  OddGroup g(2);
  std::vector<CallStats> first(2), second(2);
  Clock::time_point second_called{};
  expect_no_errors(run_threads(2, [&](int i) {
    std::vector<float> buf(16, 1.0f);
    first[i] = g.comm->all_reduce(g.rank(i), 0, buf);
    if (i == 1) {
      std::this_thread::sleep_for(milliseconds(50));
      second_called = Clock::now();
    }
    second[i] = g.comm->all_reduce(g.rank(i), 0, buf);
  }));
  EXPECT_EQ(first[0].started, first[1].started);
  EXPECT_EQ(second[0].started, second[1].started);
  EXPECT_GE(second[0].started, second_called);
  // Rank 1 returned from #0 (after its start) and slept before calling #1.
  EXPECT_GE(second[0].started - first[0].started, milliseconds(50));
}

TEST(CommunicatorStarted, TransferStartsWhenBothSidesArePosted) {
  using Clock = std::chrono::steady_clock;
  for (const bool receiver_late : {true, false}) {
    SCOPED_TRACE(receiver_late ? "receiver late" : "sender late");
    Communicator comm(2, {});
    Clock::time_point called[2], returned[2];
    CallStats stats[2];
    const int late = receiver_late ? 1 : 0;
    expect_no_errors(run_threads(2, [&](int i) {
      std::vector<float> buf(32, static_cast<float>(i));
      if (i == late) {
        while (comm.waiting_calls() < 1) std::this_thread::yield();
        std::this_thread::sleep_for(milliseconds(50));
      }
      called[i] = Clock::now();
      stats[i] = i == 0 ? comm.send(0, 1, 3, 9, buf, "pp_send op 0") : comm.recv(1, 0, 3, 9, buf, "pp_recv op 0");
      returned[i] = Clock::now();
    }));
    // Both sides report the same start: the moment the second side came.
    EXPECT_EQ(stats[0].started, stats[1].started);
    EXPECT_GE(stats[0].started, called[late]);
    EXPECT_GE(stats[0].started - called[1 - late], milliseconds(50));
    EXPECT_LE(stats[0].started, returned[0]);
    EXPECT_LE(stats[1].started, returned[1]);
    EXPECT_EQ(stats[1].bytes_received, 32 * 4);
  }
}

}  // namespace
}  // namespace lacuna::runtime
