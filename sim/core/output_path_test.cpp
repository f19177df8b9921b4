// Output paths: what a path resolves to, what is refused before a run, and
// how AtomicFile writes each kind of target (regular, symlink, FIFO, device).
#include "sim/core/output_path.h"

#include <gtest/gtest.h>

#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <sstream>
#include <thread>

#include "sim/core/atomic_file.h"
#include "sim/core/error.h"
#include "sim/core/interrupt_cleanup.h"

namespace lacuna {
namespace {
namespace fs = std::filesystem;

class OutputPathTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::path(::testing::TempDir()) /
           ("lacuna-output-path-" + std::to_string(::getpid()) + "-" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string at(const std::string& name) const { return (dir_ / name).string(); }
  static std::string read(const std::string& p) {
    std::ifstream in(p, std::ios::binary);
    std::ostringstream s;
    s << in.rdbuf();
    return s.str();
  }
  fs::path dir_;
};

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST_F(OutputPathTest, RefusesEmptyDirectoryMissingParentAndLoops) {
  EXPECT_NE(error_of([] { resolve_output("", "--json"); }).find("the output path is empty"), std::string::npos);
  const std::string d = error_of([&] { resolve_output(dir_.string(), "--json"); });
  EXPECT_NE(d.find("is a directory"), std::string::npos) << d;
  EXPECT_NE(d.find("--json"), std::string::npos) << d;
  const std::string m = error_of([&] { resolve_output(at("no/such/out.json"), "--svg"); });
  EXPECT_NE(m.find("does not exist"), std::string::npos) << m;
  fs::create_symlink("b", at("a"));
  fs::create_symlink("a", at("b"));
  const std::string loop = error_of([&] { resolve_output(at("a"), "--trace"); });
  EXPECT_NE(loop.find("symlink loop"), std::string::npos) << loop;
  fs::create_symlink(dir_, at("dirlink"));
  EXPECT_NE(error_of([&] { resolve_output(at("dirlink"), "--json"); }).find("points at a directory"),
            std::string::npos);
}

TEST_F(OutputPathTest, FollowsSymlinksAndClassifiesTargets) {
  fs::create_directories(dir_ / "real");
  fs::create_symlink("real/out.json", at("link.json"));  // dangling: the file is created where it points
  const OutputTarget t = resolve_output(at("link.json"), "--json");
  EXPECT_EQ(t.resolved, dir_ / "real/out.json");
  EXPECT_FALSE(t.write_through);
  ASSERT_EQ(::mkfifo(at("fifo").c_str(), 0600), 0);
  EXPECT_TRUE(resolve_output(at("fifo"), "--json").write_through);
  EXPECT_FALSE(resolve_output(at("new.json"), "--json").write_through);
}

TEST_F(OutputPathTest, SamePathTwiceOrAnInputIsRefusedNamingBoth) {
  std::ofstream(at("scenario.pbtxt")) << "name: \"x\"\n";
  fs::create_symlink("out.json", at("alias.json"));
  const std::string twice =
      error_of([&] { check_outputs({{"--json", at("out.json")}, {"--trace", at("alias.json")}}, {}); });
  EXPECT_NE(twice.find("--trace"), std::string::npos) << twice;
  EXPECT_NE(twice.find("--json"), std::string::npos) << twice;
  const std::string spelled = error_of(
      [&] { check_outputs({{"--json", at("out.json")}, {"--svg", (dir_ / "." / "out.json").string()}}, {}); });
  EXPECT_NE(spelled.find("same file"), std::string::npos) << spelled;
  const std::string input =
      error_of([&] { check_outputs({{"--json", at("scenario.pbtxt")}}, {{"INPUT", at("scenario.pbtxt")}}); });
  EXPECT_NE(input.find("the same file as the input"), std::string::npos) << input;
  // Distinct files, unused options and two outputs streamed to one FIFO pass.
  ASSERT_EQ(::mkfifo(at("fifo").c_str(), 0600), 0);
  EXPECT_NO_THROW(check_outputs({{"--json", at("a.json")}, {"--svg", at("a.svg")}, {"--trace", ""}},
                                {{"INPUT", at("scenario.pbtxt")}, {"--calibration", ""}}));
  EXPECT_NO_THROW(check_outputs({{"--json", at("fifo")}, {"--svg", at("fifo")}}, {}));
}

TEST_F(OutputPathTest, AtomicFileWritesThroughASymlinkAndKeepsTheLinkAndMode) {
  std::ofstream(at("target.json")) << "old";
  ::chmod(at("target.json").c_str(), 0640);
  fs::create_symlink("target.json", at("link.json"));
  write_file_atomically(at("link.json"), "new");
  EXPECT_TRUE(fs::is_symlink(at("link.json")));
  EXPECT_EQ(read(at("target.json")), "new");
  EXPECT_EQ(fs::status(at("target.json")).permissions() & fs::perms::all,
            fs::perms::owner_read | fs::perms::owner_write | fs::perms::group_read);
  // No temporary file is left beside it.
  int files = 0;
  for (const auto& e : fs::directory_iterator(dir_)) files += e.path().filename().string().find(".tmp.") != std::string::npos;
  EXPECT_EQ(files, 0);
}

TEST_F(OutputPathTest, AtomicFileStreamsIntoAFifo) {
  ASSERT_EQ(::mkfifo(at("fifo").c_str(), 0600), 0);
  std::string got;
  std::thread reader([&] { got = read(at("fifo")); });
  write_file_atomically(at("fifo"), "streamed\n");
  reader.join();
  EXPECT_EQ(got, "streamed\n");
  EXPECT_EQ(fs::status(at("fifo")).type(), fs::file_type::fifo);  // still a FIFO, not replaced
}

TEST_F(OutputPathTest, AtomicFileReportsAFullDeviceAndLeavesTheNode) {
  // A copy of /dev/full (char 1:7) in the temporary directory: creating a
  // device node needs CAP_MKNOD, so this runs as root only.
  if (::mknod(at("full").c_str(), S_IFCHR | 0666, makedev(1, 7)) != 0) GTEST_SKIP() << "mknod needs root";
  const std::string e = error_of([&] {
    AtomicFile f(at("full"));
    f.write(std::string(1 << 16, 'x'));
    f.commit();
  });
  EXPECT_NE(e.find("No space left on device"), std::string::npos) << e;
  EXPECT_EQ(fs::status(at("full")).type(), fs::file_type::character);
}

TEST(InterruptCleanup, SlotsAreReusedAfterUnregistering) {
  std::vector<int> slots;
  for (int i = 0; i < 64; ++i) {
    slots.push_back(register_partial_output("/tmp/x" + std::to_string(i), "x"));
    ASSERT_GE(slots.back(), 0);
  }
  EXPECT_EQ(register_partial_output("/tmp/full", "x"), -1);  // table full: the owner still removes its file
  unregister_partial_output(slots[5]);
  EXPECT_EQ(register_partial_output("/tmp/again", "x"), slots[5]);
  for (int s : slots) unregister_partial_output(s);
}

}  // namespace
}  // namespace lacuna
