// The CUDA backend's process plumbing, on the CPU (no CUDA involved): mpirun
// detection, the rendezvous files, the built-in launcher's children.
#include "runtime/cuda_launch.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <string>

#include "sim/core/error.h"

namespace lacuna::runtime {
namespace {

using ::testing::HasSubstr;
using namespace std::chrono_literals;

auto env_of(std::map<std::string, std::string> vars) {
  return [vars = std::move(vars)](const char* name) -> const char* {
    const auto it = vars.find(name);
    return it == vars.end() ? nullptr : it->second.c_str();
  };
}

std::filesystem::path temp_dir(const std::string& name) {
  const auto dir = std::filesystem::temp_directory_path() /
                   ("lacuna-launch-test-" + name + "-" + std::to_string(::getpid()));
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir;
}

TEST(CudaLaunch, DetectsOpenMpi) {
  EXPECT_FALSE(detect_mpi(env_of({})).has_value());
  const auto m = detect_mpi(env_of({{"OMPI_COMM_WORLD_SIZE", "4"},
                                    {"OMPI_COMM_WORLD_RANK", "2"},
                                    {"OMPI_COMM_WORLD_LOCAL_RANK", "0"},
                                    {"PMIX_NAMESPACE", "prterun-host-12@1"}}));
  ASSERT_TRUE(m.has_value());
  EXPECT_EQ(m->world_size, 4);
  EXPECT_EQ(m->world_rank, 2);
  EXPECT_EQ(m->local_rank, 0);
  EXPECT_EQ(m->job_id, "prterun-host-12_1");
  EXPECT_EQ(rendezvous_dir(*m, ""), "/tmp/lacuna-prterun-host-12_1");
  EXPECT_EQ(rendezvous_dir(*m, "/shared/x"), "/shared/x");
  EXPECT_THROW(detect_mpi(env_of({{"OMPI_COMM_WORLD_SIZE", "2"}})), Error);
  EXPECT_THROW(detect_mpi(env_of({{"OMPI_COMM_WORLD_SIZE", "2"}, {"OMPI_COMM_WORLD_RANK", "2"}})), Error);
  EXPECT_THROW(detect_mpi(env_of({{"OMPI_COMM_WORLD_SIZE", "x"}, {"OMPI_COMM_WORLD_RANK", "0"}})), Error);
}

TEST(CudaLaunch, RendezvousFilesCarryIdsAndOutcomes) {
  const auto dir = temp_dir("files");
  MpiEnv r0{0, 2, 0, "job"}, r1{1, 2, 1, "job"};
  EXPECT_EQ(exchange_ids_via_files(r0, dir.string(), [] { return std::string("IDS"); }, 1s), "IDS");
  EXPECT_EQ(exchange_ids_via_files(r1, dir.string(), [] { return std::string("never called"); }, 1s), "IDS");

  RankOutcome o1;
  o1.rank = 7;
  o1.spans.push_back(ExecutedSpan{0, 7, 1, 2, 3, 4, 5});
  EXPECT_EQ(gather_outcomes_via_files(r1, dir.string(), o1, 1s).size(), 1u);
  RankOutcome o0;
  o0.rank = 3;
  const auto all = gather_outcomes_via_files(r0, dir.string(), o0, 1s);
  ASSERT_EQ(all.size(), 2u);
  EXPECT_EQ(all[0].rank, 3);
  EXPECT_EQ(all[1].rank, 7);
  ASSERT_EQ(all[1].spans.size(), 1u);
  EXPECT_EQ(all[1].spans[0].end_ns, 5);
  std::filesystem::remove_all(dir);
}

TEST(CudaLaunch, AMissingRendezvousFileTimesOutNamingIt) {
  const auto dir = temp_dir("missing");
  MpiEnv r1{1, 2, 1, "job"};
  try {
    exchange_ids_via_files(r1, dir.string(), [] { return std::string(); }, 50ms);
    FAIL() << "no timeout";
  } catch (const Error& e) {
    EXPECT_THAT(std::string(e.what()), HasSubstr("waiting for the NCCL ids from world rank 0"));
    EXPECT_THAT(std::string(e.what()), HasSubstr("ids-job.bin"));
  }
  std::filesystem::remove_all(dir);
}

TEST(CudaLaunch, ChildrenShareChildZerosIdsAndReportBack) {
  const auto outcomes = run_children(
      3, [] { return std::string("ids-from-") + std::to_string(::getpid()); },
      [](int i, const std::string& ids) {
        RankOutcome o;
        o.rank = 10 + i;
        o.iteration_ns = {static_cast<std::int64_t>(ids.size())};
        o.spans.push_back(ExecutedSpan{0, 10 + i, 0, 0, 0, 1, static_cast<std::int64_t>(std::hash<std::string>{}(ids))});
        return o;
      },
      10s);
  ASSERT_EQ(outcomes.size(), 3u);
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(outcomes[static_cast<std::size_t>(i)].rank, 10 + i);
    ASSERT_EQ(outcomes[static_cast<std::size_t>(i)].spans.size(), 1u);
    // Every child saw the same ids.
    EXPECT_EQ(outcomes[static_cast<std::size_t>(i)].spans[0].end_ns, outcomes[0].spans[0].end_ns);
  }
}

TEST(CudaLaunch, AFailingChildIsReported) {
  try {
    run_children(
        2, [] { return std::string("x"); },
        [](int i, const std::string&) -> RankOutcome {
          if (i == 1) throw Error("CUDA: out of memory on rank 1");
          // The healthy child would wait for its peer forever: the launcher kills it.
          ::pause();
          return {};
        },
        10s);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_THAT(std::string(e.what()), HasSubstr("child 1 failed: CUDA: out of memory on rank 1"));
  }
}

TEST(CudaLaunch, AChildThatDiesIsReported) {
  try {
    run_children(
        2, [] { return std::string("x"); },
        [](int i, const std::string&) -> RankOutcome {
          if (i == 0) ::_exit(42);
          ::pause();
          return {};
        },
        10s);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_THAT(std::string(e.what()), HasSubstr("child 0"));
    EXPECT_THAT(std::string(e.what()), HasSubstr("ended without reporting (exit status 42)"));
  }
}

TEST(CudaLaunch, AFailureBeforeTheIdsIsReported) {
  try {
    run_children(
        2, []() -> std::string { throw Error("cannot load NCCL"); }, [](int, const std::string&) { return RankOutcome{}; },
        10s);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_THAT(std::string(e.what()), HasSubstr("child 0 failed before the ranks could connect: cannot load NCCL"));
  }
}

TEST(CudaLaunch, RunInChildReturnsOrRethrows) {
  EXPECT_EQ(run_in_child([] { return std::string("8"); }, 10s), "8");
  try {
    run_in_child([]() -> std::string { throw Error("no GPU: insufficient driver"); }, 10s);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_THAT(std::string(e.what()), HasSubstr("no GPU: insufficient driver"));
  }
}

}  // namespace
}  // namespace lacuna::runtime
