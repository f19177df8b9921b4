// End-to-end: output paths a user can get wrong are refused before the run
// (naming the option), symlinks and FIFOs are written through, and an
// interrupted run leaves no partial file behind (docs/outputs.md).
#include <gtest/gtest.h>

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>

#include "tests/cli_test_util.h"

namespace lacuna::testing {
namespace {
namespace fs = std::filesystem;

const std::string kSmall = source_path("scenarios/llm/gpt-1.3b-8gpu.pbtxt");

int files_in(const fs::path& dir) {
  int n = 0;
  for ([[maybe_unused]] const auto& e : fs::directory_iterator(dir)) ++n;
  return n;
}

TEST(OutputsE2E, BadOutputPathsAreRefusedBeforeAnythingIsWritten) {
  TempDir dir("outputs-bad");
  const std::string out = "--out-dir " + (dir / "out");
  struct Case {
    std::string args, expect;
  };
  fs::create_directories(dir.path() / "existing");
  const std::string copy = dir / "scenario.pbtxt";
  fs::copy_file(kSmall, copy);
  const std::string before = read_file(copy);
  for (const Case& c : {
           Case{"simulate " + kSmall + " " + out + " --json " + (dir / "existing"), "is a directory"},
           Case{"simulate " + kSmall + " " + out + " --json " + (dir / "x.json") + " --trace " + (dir / "x.json"),
                "is the same file as --json"},
           Case{"simulate " + copy + " " + out + " --json " + copy, "is the same file as the input"},
           Case{"simulate " + kSmall + " " + out + " --json ''", "the output path is empty"},
           Case{"simulate " + kSmall + " " + out + " --svg " + (dir / "no/such/dir/p.svg"), "does not exist"},
           Case{"compile " + copy + " -o " + copy, "is the same file as the input"},
       }) {
    SCOPED_TRACE(c.args);
    const auto r = run_lacuna(c.args);
    EXPECT_EQ(r.exit_code, 2) << r.output;
    EXPECT_NE(r.output.find(c.expect), std::string::npos) << r.output;
    // Nothing written: no default trace or SVG, no temporary file.
    EXPECT_FALSE(fs::exists(dir.path() / "out")) << r.output;
  }
  EXPECT_EQ(read_file(copy), before);
  EXPECT_EQ(files_in(dir.path()), 2);  // existing/ and scenario.pbtxt
}

TEST(OutputsE2E, SymlinksAndFifosAreWrittenThrough) {
  TempDir dir("outputs-through");
  fs::create_symlink("real.json", dir.path() / "link.json");
  ASSERT_EQ(::mkfifo((dir / "trace.fifo").c_str(), 0600), 0);
  std::string streamed;
  std::thread reader([&] { streamed = read_file(dir / "trace.fifo"); });
  const auto r = run_lacuna("simulate " + kSmall + " --no-svg --json " + (dir / "link.json") + " --trace " +
                            (dir / "trace.fifo"));
  reader.join();
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_TRUE(fs::is_symlink(dir.path() / "link.json"));
  EXPECT_NE(read_file(dir / "real.json").find("\"iteration_time_s\""), std::string::npos);
  EXPECT_EQ(fs::status(dir.path() / "trace.fifo").type(), fs::file_type::fifo);
  EXPECT_NE(streamed.find("traceEvents"), std::string::npos);
}

// A full device while the trace streams, and a number beyond double's range
// in diff's input, are the user's problem (exit 2), not lacuna's (70).
TEST(OutputsE2E, FullDeviceAndHugeNumbersAreUserErrors) {
  TempDir dir("outputs-exit");
  {
    std::ofstream(dir / "huge.json") << "{\"a\": 1e999}";
  }
  const auto d = run_lacuna("diff " + (dir / "huge.json") + " " + (dir / "huge.json"));
  EXPECT_EQ(d.exit_code, 2) << d.output;
  EXPECT_NE(d.output.find("out of range"), std::string::npos) << d.output;
  // A copy of /dev/full (char 1:7): creating it needs CAP_MKNOD.
  if (::mknod((dir / "full").c_str(), S_IFCHR | 0666, makedev(1, 7)) != 0) GTEST_SKIP() << "mknod needs root";
  for (const std::string option : {"--trace", "--json", "--svg"}) {
    SCOPED_TRACE(option);
    const std::string others = option == "--trace" ? " --no-svg" : option == "--svg" ? " --no-trace" : " --no-svg --no-trace";
    const auto r = run_lacuna("simulate " + kSmall + others + " " + option + " " + (dir / "full"));
    EXPECT_EQ(r.exit_code, 2) << r.output;
    EXPECT_NE(r.output.find("No space left on device"), std::string::npos) << r.output;
    EXPECT_EQ(fs::status(dir.path() / "full").type(), fs::file_type::character);
  }
}

// `execute --ranks` shares --trace-ranks's grammar; its errors name --ranks.
TEST(OutputsE2E, ExecuteRanksErrorsNameTheOption) {
  const auto r = run_lacuna("execute " + kSmall + " --ranks 99 --no-trace --no-svg");
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("--ranks: \"99\": rank 99 out of range"), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find("--trace-ranks:"), std::string::npos) << r.output;
}

// SIGINT while a long full-rank run holds its trace open: the process dies of
// the signal, says which outputs it stopped before finishing, and leaves no
// temporary file.
TEST(OutputsE2E, InterruptedRunLeavesNoPartialFiles) {
  TempDir dir("outputs-sigint");
  const std::string log = dir / "log.txt";
  const pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    const int fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    ::dup2(fd, 1);
    ::dup2(fd, 2);
    const std::string out = (dir.path() / "out").string();
    const std::string scenario = source_path("scenarios/llm/gpt3-175b-3072.pbtxt");
    ::execl(LACUNA_BINARY, LACUNA_BINARY, "simulate", scenario.c_str(), "--out-dir", out.c_str(), "--trace-ranks",
            "all", nullptr);
    ::_exit(127);
  }
  // Wait until the run has opened its outputs (the trace's temporary file).
  bool open = false;
  for (int i = 0; i < 600 && !open; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    std::error_code ec;
    if (fs::exists(dir.path() / "out", ec))
      for (const auto& e : fs::directory_iterator(dir.path() / "out", ec))
        open = open || e.path().filename().string().find(".tmp.") != std::string::npos;
  }
  ASSERT_TRUE(open) << read_file(log);
  ASSERT_EQ(::kill(pid, SIGINT), 0);
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  const std::string output = read_file(log);
  ASSERT_TRUE(WIFSIGNALED(status)) << "status " << status << ": " << output;
  EXPECT_EQ(WTERMSIG(status), SIGINT);
  EXPECT_NE(output.find("interrupted by SIGINT; stopped before finishing"), std::string::npos) << output;
  EXPECT_NE(output.find("partial files removed"), std::string::npos) << output;
  EXPECT_EQ(files_in(dir.path() / "out"), 0) << output;
}

}  // namespace
}  // namespace lacuna::testing
