#include "flurry/horizon.h"

#include <gtest/gtest.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <csignal>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <limits>
#include <sstream>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "flurry/status.h"

namespace flurry {
namespace {

namespace fs = std::filesystem;

constexpr std::string_view kFlurryLayout =
    "time:41@1ms,node:10,seq:12;epoch=2025-01-01T00:00:00.000Z";
constexpr std::string_view kMulticlockLayout =
    "time:41@1ms,clock:4,worker:8,seq:10;epoch=2025-01-01T00:00:00.000Z";

HorizonRecord simple_record() {
  return HorizonRecord{std::string(kFlurryLayout), 7, 0, {123456789}};
}

HorizonRecord sixteen_generations() {
  HorizonRecord r{std::string(kMulticlockLayout), 255, 9, {}};
  for (int i = 0; i < 16; ++i) r.horizons.push_back(i % 3 == 0 ? -1 : std::int64_t{1000} * i);
  r.horizons[9] = std::numeric_limits<std::int64_t>::max();
  r.horizons[15] = 0;
  return r;
}

// FNV-1a 64, the file format's checksum: lets a test build records that pass the checksum and
// so exercise the structural checks behind it.
std::uint64_t fnv1a(std::string_view s) {
  std::uint64_t h = 1469598103934665603ull;
  for (unsigned char c : s) {
    h ^= c;
    h *= 1099511628211ull;
  }
  return h;
}

std::string with_check(std::string_view body) {
  return std::string(body) + "check " + std::to_string(fnv1a(body)) + "\n";
}

// The record's text without its check line.
std::string body_of(const HorizonRecord& r) {
  const std::string text = format_horizon_record(r);
  const std::size_t pos = text.rfind("check ");
  EXPECT_NE(pos, std::string::npos);
  return text.substr(0, pos);
}

std::vector<std::string> lines_of(std::string_view body) {
  std::vector<std::string> out;
  std::istringstream in{std::string(body)};
  for (std::string line; std::getline(in, line);) out.push_back(line);
  return out;
}

std::string join_lines(const std::vector<std::string>& lines) {
  std::string out;
  for (const std::string& l : lines) out += l + "\n";
  return out;
}

void expect_data_loss(std::string_view text, std::string_view what) {
  const Result<HorizonRecord> r = parse_horizon_record(text);
  ASSERT_FALSE(r.ok()) << what << ": accepted\n" << text;
  EXPECT_EQ(r.status().code(), StatusCode::kDataLoss) << what << ": " << r.status().to_string();
  EXPECT_EQ(r.status().reason(), Reason::kCorrupt);
  EXPECT_FALSE(r.status().message().empty()) << what;
}

// ---------------------------------------------------------------------------------------------
// format / parse

TEST(HorizonRecordTest, FormatIsTheDocumentedText) {
  const std::string body = std::string("flurry-horizon 1\nlayout ") + std::string(kFlurryLayout) +
                           "\nnode 7\ngeneration 0\nhorizons 123456789\n";
  EXPECT_EQ(format_horizon_record(simple_record()), with_check(body));
}

TEST(HorizonRecordTest, RoundTrips) {
  std::vector<HorizonRecord> records = {
      simple_record(),
      sixteen_generations(),
      HorizonRecord{std::string(kFlurryLayout), 0, 0, {-1}},
      HorizonRecord{std::string(kFlurryLayout),
                    std::numeric_limits<std::uint64_t>::max(),
                    0,
                    {std::numeric_limits<std::int64_t>::max()}},
      HorizonRecord{std::string(kMulticlockLayout), 3, 15, std::vector<std::int64_t>(16, -1)},
      HorizonRecord{"x", 1, 1, {0, 0}},
  };
  for (const HorizonRecord& r : records) {
    const std::string text = format_horizon_record(r);
    const Result<HorizonRecord> back = parse_horizon_record(text);
    ASSERT_TRUE(back.ok()) << back.status().to_string() << "\n" << text;
    EXPECT_EQ(*back, r) << text;
    EXPECT_EQ(format_horizon_record(*back), text);
  }
}

TEST(HorizonRecordTest, RejectsEmptyText) {
  expect_data_loss("", "empty");
  expect_data_loss("\n", "newline");
  expect_data_loss(with_check(""), "only a check line");
}

TEST(HorizonRecordTest, RejectsEveryTruncation) {
  for (const HorizonRecord& r : {simple_record(), sixteen_generations()}) {
    const std::string text = format_horizon_record(r);
    for (std::size_t n = 0; n < text.size(); ++n) {
      expect_data_loss(std::string_view(text).substr(0, n),
                       "prefix of " + std::to_string(n) + " characters");
    }
  }
}

TEST(HorizonRecordTest, RejectsTrailingGarbage) {
  const std::string text = format_horizon_record(simple_record());
  expect_data_loss(text + "\n", "extra newline");
  expect_data_loss(text + "x", "extra character");
  expect_data_loss(text + text, "the record twice");
}

TEST(HorizonRecordTest, RejectsEveryFlippedCharacter) {
  for (const HorizonRecord& r : {simple_record(), sixteen_generations()}) {
    const std::string text = format_horizon_record(r);
    for (std::size_t i = 0; i < text.size(); ++i) {
      for (const char mask : {'\x01', '\x10'}) {
        std::string bad = text;
        bad[i] = static_cast<char>(bad[i] ^ mask);
        expect_data_loss(bad, "flipped character " + std::to_string(i));
      }
    }
  }
}

TEST(HorizonRecordTest, RejectsAMissingLine) {
  for (const HorizonRecord& r : {simple_record(), sixteen_generations()}) {
    const std::vector<std::string> lines = lines_of(body_of(r));
    ASSERT_EQ(lines.size(), 5u);
    for (std::size_t skip = 0; skip < lines.size(); ++skip) {
      std::vector<std::string> kept = lines;
      kept.erase(kept.begin() + static_cast<std::ptrdiff_t>(skip));
      const std::string body = join_lines(kept);
      // Without a valid checksum, and with one (the structure is checked too).
      expect_data_loss(body + "check 0\n", "line " + std::to_string(skip + 1) + " missing");
      expect_data_loss(with_check(body),
                       "line " + std::to_string(skip + 1) + " missing, re-summed");
    }
    // Without the check line.
    expect_data_loss(body_of(r), "check line missing");
  }
}

// Replaces line `index` (0-based) of a valid record's body and re-sums it.
std::string replace_line(std::size_t index, const std::string& line) {
  std::vector<std::string> lines = lines_of(body_of(simple_record()));
  lines.at(index) = line;
  return with_check(join_lines(lines));
}

TEST(HorizonRecordTest, StructureTestHelperMakesValidRecords) {
  // Guards the tests below: an unchanged line re-summed parses.
  const Result<HorizonRecord> r = parse_horizon_record(replace_line(2, "node 7"));
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ(*r, simple_record());
}

TEST(HorizonRecordTest, RejectsBadNumbers) {
  const std::vector<std::string> bad_nodes = {
      "node abc", "node -1", "node ", "node", "node 7x", "node 1.5", "node 18446744073709551616",
  };
  for (const std::string& l : bad_nodes) expect_data_loss(replace_line(2, l), l);
  const std::vector<std::string> bad_generations = {
      "generation x", "generation -1", "generation ", "generation", "generation 0 0",
  };
  for (const std::string& l : bad_generations) expect_data_loss(replace_line(3, l), l);
  const std::vector<std::string> bad_horizons = {
      "horizons",     "horizons ",     "horizons x",  "horizons 1 x",
      "horizons -2",  "horizons 1  2", "horizons  1", "horizons 9223372036854775808",
      "horizons 1,2",
  };
  for (const std::string& l : bad_horizons) expect_data_loss(replace_line(4, l), l);
  expect_data_loss(replace_line(1, "layout"), "empty layout");
  expect_data_loss(replace_line(1, "layout "), "empty layout");
  expect_data_loss(replace_line(0, "flurry-horizon 2"), "unknown version");
  expect_data_loss(replace_line(0, "flurry-horizon 1 "), "trailing blank in magic");
}

TEST(HorizonRecordTest, RejectsExtraLines) {
  const std::vector<std::string> lines = lines_of(body_of(simple_record()));
  const std::vector<std::string> extras = {
      "foo bar", "", "node 7", "generation 0", "layout x", "horizons 1", "flurry-horizon 1"};
  for (const std::string& extra : extras) {
    for (std::size_t at = 1; at <= lines.size(); ++at) {
      std::vector<std::string> more = lines;
      more.insert(more.begin() + static_cast<std::ptrdiff_t>(at), extra);
      expect_data_loss(with_check(join_lines(more)),
                       "extra line \"" + extra + "\" at " + std::to_string(at));
    }
  }
}

TEST(HorizonRecordTest, RejectsABadLineEvenWhenAGoodOneFollows) {
  // Anything format_horizon_record did not produce is rejected; a bad line is not skipped.
  std::vector<std::string> lines = lines_of(body_of(simple_record()));
  lines.insert(lines.begin() + 2, "node abc");
  expect_data_loss(with_check(join_lines(lines)), "bad node line before a good one");

  lines = lines_of(body_of(simple_record()));
  lines.insert(lines.begin() + 3, "generation x");
  expect_data_loss(with_check(join_lines(lines)), "bad generation line before a good one");

  lines = lines_of(body_of(simple_record()));
  lines.insert(lines.begin() + 1, "layout");
  expect_data_loss(with_check(join_lines(lines)), "empty layout line before a good one");
}

TEST(HorizonRecordTest, RejectsNonCanonicalText) {
  // format_horizon_record writes numbers without leading zeros or signs, single blanks, and the
  // lines in a fixed order; anything else did not come from it.
  expect_data_loss(replace_line(2, "node 07"), "leading zero in node");
  expect_data_loss(replace_line(2, "node +7"), "plus sign in node");
  expect_data_loss(replace_line(3, "generation 00"), "leading zero in generation");
  expect_data_loss(replace_line(4, "horizons 0123456789"), "leading zero in horizons");
  expect_data_loss(replace_line(4, "horizons 123456789 "), "trailing blank in horizons");
  expect_data_loss(replace_line(2, "node  7"), "two blanks in node");
  expect_data_loss(replace_line(2, "node 7 "), "trailing blank in node");
  std::vector<std::string> lines = lines_of(body_of(simple_record()));
  std::swap(lines[2], lines[3]);
  expect_data_loss(with_check(join_lines(lines)), "node and generation swapped");
}

TEST(HorizonRecordTest, RejectsAGenerationWithoutAHorizon) {
  expect_data_loss(format_horizon_record({std::string(kFlurryLayout), 7, 1, {5}}), "gen 1 of 1");
  expect_data_loss(format_horizon_record(
                       {std::string(kMulticlockLayout), 7, 16, std::vector<std::int64_t>(16, -1)}),
                   "gen 16 of 16");
  expect_data_loss(format_horizon_record({std::string(kFlurryLayout), 7, 0, {}}), "no horizons");
  expect_data_loss(
      format_horizon_record(
          {std::string(kFlurryLayout), 7, std::numeric_limits<std::uint64_t>::max(), {5}}),
      "huge generation");
}

// ---------------------------------------------------------------------------------------------
// FileHorizonStore

class FileHorizonStoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string tmpl = (fs::path(::testing::TempDir()) / "flurry-horizon-test-XXXXXX").string();
    ASSERT_NE(::mkdtemp(tmpl.data()), nullptr) << "mkdtemp " << tmpl;
    dir_ = tmpl;
  }
  void TearDown() override {
    std::error_code ec;
    // Restore permissions a test may have taken away, so the directory can be removed.
    for (auto it = fs::recursive_directory_iterator(dir_, ec);
         !ec && it != fs::recursive_directory_iterator(); it.increment(ec)) {
      if (it->is_directory(ec))
        fs::permissions(it->path(), fs::perms::owner_all, fs::perm_options::add, ec);
    }
    fs::permissions(dir_, fs::perms::owner_all, fs::perm_options::add, ec);
    fs::remove_all(dir_, ec);
    EXPECT_FALSE(ec) << "remove " << dir_ << ": " << ec.message();
  }

  static std::string read_file(const fs::path& p) {
    std::ifstream in(p, std::ios::binary);
    return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
  }
  static void write_file(const fs::path& p, std::string_view text) {
    std::ofstream out(p, std::ios::binary | std::ios::trunc);
    out << text;
    ASSERT_TRUE(out.good()) << p;
  }
  // Every entry of `d` whose name contains ".tmp".
  static std::vector<std::string> tmp_files(const fs::path& d) {
    std::vector<std::string> out;
    for (const auto& e : fs::directory_iterator(d)) {
      const std::string name = e.path().filename().string();
      if (name.find(".tmp") != std::string::npos) out.push_back(name);
    }
    return out;
  }

  fs::path dir_;
};

TEST_F(FileHorizonStoreTest, PathFor) {
  EXPECT_EQ(FileHorizonStore::path_for(dir_, 7), dir_ / "horizon-node-7.state");
  EXPECT_EQ(FileHorizonStore::path_for("/var/lib/flurry", 0),
            fs::path("/var/lib/flurry/horizon-node-0.state"));
  EXPECT_EQ(FileHorizonStore::path_for("state", 18446744073709551615ull),
            fs::path("state") / "horizon-node-18446744073709551615.state");
  EXPECT_EQ(FileHorizonStore(dir_ / "x.state").describe(), (dir_ / "x.state").string());
}

TEST_F(FileHorizonStoreTest, LoadOfAMissingFileIsNotFound) {
  FileHorizonStore store(FileHorizonStore::path_for(dir_, 7));
  const Result<HorizonRecord> r = store.load();
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kNotFound) << r.status().to_string();

  FileHorizonStore nested(dir_ / "no" / "such" / "dir" / "h.state");
  EXPECT_EQ(nested.load().status().code(), StatusCode::kNotFound);
}

TEST_F(FileHorizonStoreTest, SaveThenLoad) {
  const fs::path file = FileHorizonStore::path_for(dir_, 7);
  FileHorizonStore store(file);
  ASSERT_TRUE(store.save(simple_record()).ok());
  const Result<HorizonRecord> r = store.load();
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ(*r, simple_record());
  EXPECT_EQ(read_file(file), format_horizon_record(simple_record()));

  // A second store on the same file sees it (what a restart does).
  FileHorizonStore again(file);
  const Result<HorizonRecord> r2 = again.load();
  ASSERT_TRUE(r2.ok()) << r2.status().to_string();
  EXPECT_EQ(*r2, simple_record());
}

TEST_F(FileHorizonStoreTest, SecondSaveReplacesTheFirst) {
  const fs::path file = FileHorizonStore::path_for(dir_, 3);
  FileHorizonStore store(file);
  ASSERT_TRUE(store.save(sixteen_generations()).ok());
  ASSERT_TRUE(store.save(simple_record()).ok());
  const Result<HorizonRecord> r = store.load();
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ(*r, simple_record());
  // The shorter record fully replaced the longer one: nothing of it is left at the end.
  EXPECT_EQ(read_file(file), format_horizon_record(simple_record()));

  HorizonRecord next = simple_record();
  for (int i = 0; i < 50; ++i) {
    next.horizons[0] += 1000;
    ASSERT_TRUE(store.save(next).ok());
    const Result<HorizonRecord> got = store.load();
    ASSERT_TRUE(got.ok()) << got.status().to_string();
    ASSERT_EQ(*got, next);
  }
}

TEST_F(FileHorizonStoreTest, SaveCreatesMissingDirectories) {
  const fs::path file = dir_ / "a" / "b" / "c" / "horizon-node-1.state";
  FileHorizonStore store(file);
  const Status st = store.save(simple_record());
  ASSERT_TRUE(st.ok()) << st.to_string();
  EXPECT_TRUE(fs::is_directory(dir_ / "a" / "b" / "c"));
  EXPECT_TRUE(fs::is_regular_file(file));
  const Result<HorizonRecord> r = store.load();
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ(*r, simple_record());
}

TEST_F(FileHorizonStoreTest, NoTemporaryFileIsLeftAfterASave) {
  FileHorizonStore store(FileHorizonStore::path_for(dir_, 7));
  ASSERT_TRUE(store.save(simple_record()).ok());
  ASSERT_TRUE(store.save(sixteen_generations()).ok());
  EXPECT_TRUE(tmp_files(dir_).empty());
  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator(dir_)) names.push_back(e.path().filename().string());
  EXPECT_EQ(names, std::vector<std::string>{"horizon-node-7.state"});
}

TEST_F(FileHorizonStoreTest, CorruptFileIsDataLossNotNotFound) {
  const fs::path file = FileHorizonStore::path_for(dir_, 7);
  FileHorizonStore store(file);
  ASSERT_TRUE(store.save(simple_record()).ok());
  const std::string good = read_file(file);

  const std::vector<std::string> corruptions = {
      "",                               // emptied
      good.substr(0, good.size() / 2),  // torn
      good.substr(0, good.size() - 1),  // last byte lost
      std::string(good.size(), '\0'),   // zeroed
      "garbage\n",
  };
  for (const std::string& bad : corruptions) {
    write_file(file, bad);
    const Result<HorizonRecord> r = store.load();
    ASSERT_FALSE(r.ok()) << "loaded a corrupt file";
    EXPECT_EQ(r.status().code(), StatusCode::kDataLoss) << r.status().to_string();
    EXPECT_EQ(r.status().reason(), Reason::kCorrupt);
    EXPECT_NE(r.status().message().find(file.string()), std::string::npos)
        << "the message should name the file: " << r.status().message();
  }

  std::string flipped = good;
  flipped[flipped.size() / 3] ^= 0x04;
  write_file(file, flipped);
  EXPECT_EQ(store.load().status().code(), StatusCode::kDataLoss);

  // Far too large to be a record.
  write_file(file, std::string(1 << 20, 'x'));
  EXPECT_EQ(store.load().status().code(), StatusCode::kDataLoss);
}

TEST_F(FileHorizonStoreTest, SaveUnderARegularFileFails) {
  // A regular file where the directory should be stops the save even for root.
  write_file(dir_ / "afile", "not a directory");
  FileHorizonStore store(dir_ / "afile" / "horizon.state");
  const Status st = store.save(simple_record());
  EXPECT_FALSE(st.ok());
  EXPECT_EQ(read_file(dir_ / "afile"), "not a directory");
  // And nothing was saved.
  EXPECT_FALSE(store.load().ok());

  FileHorizonStore deeper(dir_ / "afile" / "sub" / "horizon.state");
  EXPECT_FALSE(deeper.save(simple_record()).ok());
}

TEST_F(FileHorizonStoreTest, FailedSaveLeavesThePreviousRecordIntact) {
  const fs::path file = FileHorizonStore::path_for(dir_, 7);
  FileHorizonStore store(file);
  ASSERT_TRUE(store.save(simple_record()).ok());
  const std::string before = read_file(file);

  // A file size limit of one byte: no one, root included, can write the temporary file (its name
  // is unique, so it cannot be blocked in advance). SIGXFSZ ignored, the write fails with EFBIG.
  struct rlimit old_limit {};
  ASSERT_EQ(::getrlimit(RLIMIT_FSIZE, &old_limit), 0);
  struct rlimit tiny = old_limit;
  tiny.rlim_cur = 1;
  const auto old_handler = std::signal(SIGXFSZ, SIG_IGN);
  ASSERT_EQ(::setrlimit(RLIMIT_FSIZE, &tiny), 0);
  const Status st = store.save(sixteen_generations());
  ASSERT_EQ(::setrlimit(RLIMIT_FSIZE, &old_limit), 0);
  std::signal(SIGXFSZ, old_handler);
  EXPECT_FALSE(st.ok());
  EXPECT_EQ(read_file(file), before);
  EXPECT_TRUE(tmp_files(dir_).empty());
  const Result<HorizonRecord> r = store.load();
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ(*r, simple_record());

  // Once the obstacle is gone, saving works again.
  ASSERT_TRUE(store.save(sixteen_generations()).ok());
  EXPECT_EQ(*store.load(), sixteen_generations());
}

TEST_F(FileHorizonStoreTest, FailedRenameLeavesNoTemporaryFile) {
  // The store's path is a non-empty directory: the write succeeds but the rename cannot.
  const fs::path file = dir_ / "horizon.state";
  fs::create_directories(file / "inside");
  FileHorizonStore store(file);
  EXPECT_FALSE(store.save(simple_record()).ok());
  EXPECT_TRUE(tmp_files(dir_).empty());
  EXPECT_TRUE(fs::is_directory(file / "inside"));
}

}  // namespace
}  // namespace flurry
