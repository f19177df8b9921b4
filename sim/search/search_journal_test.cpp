// The search journal read back as an input (search_journal.h): every record
// checked against the search's hash, a bad one refused by its line, only the
// interrupted last line dropped, and paths that are not regular files
// refused before they are opened.
#include "sim/search/search_journal.h"

#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <random>
#include <string>

#include <gtest/gtest.h>

#include "sim/core/error.h"

namespace lacuna::search {
namespace {

namespace fs = std::filesystem;

constexpr uint64_t kHash = 0x0123456789abcdefull;
const std::string kGood =
    R"({"gpus":8,"iteration_s":0.5,"mfu":0.42,"peak_memory_bytes":1000,"tokens_per_s":12345.0})";
const std::string kProblem = R"({"problem":"does not fit"})";

class SearchJournal : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("lacuna-journal-test-" + std::to_string(::getpid()) + "-" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string at(const std::string& name) const { return (dir_ / name).string(); }
  std::string write(const std::string& name, const std::string& text) const {
    std::ofstream(at(name), std::ios::binary) << text;
    return at(name);
  }
  // The error read_journal throws, or "no error".
  static std::string error_of(const std::string& path, size_t candidates = 100) {
    try {
      (void)read_journal(path, kHash, candidates);
    } catch (const Error& e) {
      return e.what();
    }
    return "no error";
  }
  fs::path dir_;
};

std::string journal(const std::vector<std::pair<size_t, std::string>>& records) {
  std::string text = journal_header(kHash) + "\n";
  for (const auto& [id, r] : records) text += journal_line(kHash, id, r) + "\n";
  return text;
}

TEST_F(SearchJournal, RecordsRoundTripAndTheInterruptedLastLineIsDropped) {
  std::string text = journal({{3, kGood}, {7, kProblem}});
  text += "\n";                                                   // a resumed run's separator
  text += journal_line(kHash, 9, kGood).substr(0, 20);           // cut short, no newline
  const auto records = read_journal(write("j", text), kHash, 100);
  ASSERT_EQ(records.size(), 2u);
  EXPECT_EQ(records.at(3), kGood);
  EXPECT_EQ(records.at(7), kProblem);
  const Simulated s = parse_record(records.at(3), SourceLocation{});
  EXPECT_EQ(s.gpus, 8);
  EXPECT_DOUBLE_EQ(s.mfu, 0.42);
  EXPECT_EQ(parse_record(records.at(7), SourceLocation{}).problem, "does not fit");
  EXPECT_TRUE(read_journal(at("absent"), kHash, 100).empty());
}

// Any single byte changed in a complete record line is refused by its line
// number (never used, never an internal error): random positions and values.
TEST_F(SearchJournal, EveryCorruptedByteOfARecordIsRefusedByLine) {
  const std::string text = journal({{3, kGood}, {4, kGood}, {5, kProblem}});
  const size_t second_line = text.find('\n') + 1;
  const size_t third_line = text.find('\n', second_line) + 1;
  std::mt19937 rng(7);
  for (int trial = 0; trial < 200; ++trial) {
    std::string bad = text;
    const size_t pos = third_line + rng() % (text.find('\n', third_line) - third_line);  // record of id 4
    const char was = bad[pos];
    do bad[pos] = static_cast<char>(rng() % 256);
    while (bad[pos] == was || bad[pos] == '\n');
    const std::string e = error_of(write("j", bad));
    EXPECT_NE(e.find(":3:"), std::string::npos) << "byte " << pos << ": " << e;
  }
}

TEST_F(SearchJournal, ForgedAndMisplacedRecordsAreRefused) {
  // A record claiming a failure, with the checksum of another search.
  std::string text = journal({{3, kGood}});
  text += "4\t" + kProblem + "\t0000000000000000\n";
  EXPECT_NE(error_of(write("j", text)).find("fails its checksum"), std::string::npos);
  // A valid line of another search's journal.
  text = journal({{3, kGood}}) + journal_line(kHash + 1, 4, kGood) + "\n";
  EXPECT_NE(error_of(write("j", text)).find("fails its checksum"), std::string::npos);
  // A candidate the search does not have.
  EXPECT_NE(error_of(write("j", journal({{100, kGood}})), 100).find("candidate 100 does not exist"),
            std::string::npos);
  // Two different records of one candidate.
  EXPECT_NE(error_of(write("j", journal({{3, kGood}, {3, kProblem}}))).find("second, different record"),
            std::string::npos);
  // Checksummed but not a record this lacuna writes.
  for (const std::string& r : {std::string("[]"), std::string(R"({"problem":""})"),
                               std::string(R"({"gpus":8,"iteration_s":0.5,"mfu":1.69,"peak_memory_bytes":1,"tokens_per_s":1})"),
                               std::string(R"({"gpus":0,"iteration_s":0.5,"mfu":0.5,"peak_memory_bytes":1,"tokens_per_s":1})"),
                               std::string(R"({"gpus":8,"iteration_s":"x","mfu":0.5,"peak_memory_bytes":1,"tokens_per_s":1})"),
                               std::string("not json")}) {
    const std::string e = error_of(write("j", journal({{3, r}})));
    EXPECT_NE(e.find(":2:"), std::string::npos) << r << ": " << e;
    EXPECT_NE(e.find("the record"), std::string::npos) << r << ": " << e;
  }
}

TEST_F(SearchJournal, HeadersOfAnotherSearchOrFormatAreRefused) {
  EXPECT_NE(error_of(write("j", journal_header(kHash + 1) + "\n")).find("another search"), std::string::npos);
  EXPECT_NE(error_of(write("j", "lacuna-search-journal v1 0123456789abcdef\n")).find("another format"),
            std::string::npos);
  EXPECT_NE(error_of(write("j", "name: \"a scenario\"\n")).find("not a search journal"), std::string::npos);
  // The magic alone, or with a cut version (found by the journal fuzz target).
  EXPECT_NE(error_of(write("j", "lacuna-search-journal\n")).find("another format"), std::string::npos);
  EXPECT_NE(error_of(write("j", "lacuna-search-journal v\n")).find("another format"), std::string::npos);
}

TEST_F(SearchJournal, PathsThatAreNotRegularFilesAreRefusedBeforeOpening) {
  const std::string scenario = write("scenario.pbtxt", "name: \"keep me\"\n");
  fs::create_symlink(scenario, at("link"));
  EXPECT_NE(error_of(at("link")).find("symbolic link"), std::string::npos);
  EXPECT_THROW(check_journal_path(at("link")), Error);
  ASSERT_EQ(::mkfifo(at("fifo").c_str(), 0600), 0);
  EXPECT_NE(error_of(at("fifo")).find("a FIFO"), std::string::npos);  // returns: never opened
  fs::create_directory(at("dir"));
  EXPECT_NE(error_of(at("dir")).find("a directory"), std::string::npos);
  // Over the cap: refused from its size, not read (a sparse file).
  const std::string big = write("big", journal_header(kHash) + "\n");
  fs::resize_file(big, kJournalInput.max_bytes + 1);
  EXPECT_NE(error_of(big).find("above the 64 MiB"), std::string::npos) << error_of(big);
  EXPECT_NO_THROW(check_journal_path(scenario));
  EXPECT_NO_THROW(check_journal_path(at("absent")));
}

// The fuzz target's seeds stay journals it accepts, or it would fuzz only the
// refusals (tests/fuzz/fuzz_journal.cpp's hash).
TEST(SearchJournalSeeds, AreAcceptedJournals) {
  const std::string dir = std::string(LACUNA_SOURCE_DIR) + "/tests/fuzz/seeds/journal/";
  constexpr uint64_t kSeedHash = 0x5eed5eed5eed5eedull;
  EXPECT_EQ(read_journal(dir + "resumable.journal", kSeedHash, 1000).size(), 3u);
  EXPECT_EQ(read_journal(dir + "interrupted.journal", kSeedHash, 1000).size(), 1u);
}

}  // namespace
}  // namespace lacuna::search
