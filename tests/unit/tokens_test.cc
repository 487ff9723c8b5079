// The token files (flurry/server/tokens.h): the token file's format, every refusal with the
// file and its line number, the admin token file beside it, and that no message ever holds a
// token or any other text of the file.
#include "ops/tokens.h"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <fstream>
#include <string>

#include "test_store.h"

namespace flurry::ops {
namespace {

using testing::TempDir;

#define EXPECT_HAS(text, part) \
  EXPECT_NE(std::string(text).find(part), std::string::npos) << (text) << " lacks " << (part)

const std::string kOne = "one-0123456789abcdef0123456789abcdef";
const std::string kTwo = "two-0123456789abcdef0123456789abcdef";

class TokensTest : public ::testing::Test {
 protected:
  std::filesystem::path write(const std::string& text, const std::string& name,
                              mode_t mode = 0600) {
    const std::filesystem::path path = dir_.path() / name;
    std::ofstream(path) << text;
    EXPECT_EQ(::chmod(path.c_str(), mode), 0);
    return path;
  }
  // The message of a refused token file; it must name the file and hold none of `secrets`.
  std::string refusal(const std::string& text, std::initializer_list<std::string> secrets = {}) {
    const std::filesystem::path file = write(text, "tokens");
    Result<TokenList> r = read_token_file(file);
    EXPECT_FALSE(r.ok());
    if (r.ok()) return {};
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
    const std::string& m = r.status().message();
    EXPECT_HAS(m, "token_file \"" + file.string() + "\"");
    for (const std::string& s : secrets) EXPECT_EQ(m.find(s), std::string::npos) << m;
    return m;
  }

  TempDir dir_;
};

TEST_F(TokensTest, ReadsTokensWithTheirScopesSkippingCommentsAndBlankLines) {
  const std::filesystem::path file = write(
      "# issuers\n\n  " + kOne + "  ids , read\n\t# admin\n" + kTwo + " admin,orders:decode\r\n",
      "tokens");
  Result<TokenList> r = read_token_file(file);
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  ASSERT_EQ(r->size(), 2u);
  EXPECT_EQ((*r)[0].token, kOne);
  EXPECT_EQ((*r)[0].scopes, (ScopeSet{Scope::kIds, Scope::kRead}));
  EXPECT_EQ((*r)[1].token, kTwo);
  EXPECT_EQ((*r)[1].scopes, (ScopeSet{Scope::kAdmin, Scope::kOrdersDecode}));
  EXPECT_EQ(token_with(*r, Scope::kAdmin), &(*r)[1]);
  EXPECT_EQ(token_with(*r, Scope::kRead), &(*r)[0]);
}

TEST_F(TokensTest, EveryRefusalNamesTheLineAndNeverTheToken) {
  std::string m = refusal("# c\n" + kOne + " ids\n" + kTwo + " ids,wirte\n", {kOne, kTwo});
  EXPECT_HAS(m, ": line 3: scope 2 is not one of ids, read, admin, orders:decode");
  EXPECT_EQ(m.find("wirte"), std::string::npos) << m;  // the file's text is never quoted

  // Token and scopes swapped: the "scope" is the token, and is not printed.
  m = refusal("read " + kOne + "\n", {kOne});
  EXPECT_HAS(m, ": line 1: the token has 4 characters; at least 32");

  m = refusal(kOne + " ids\n\n" + kOne + " read\n", {kOne});
  EXPECT_HAS(m, ": line 3: the token is the same as line 1's");

  m = refusal("\n" + kOne + "\n", {kOne});
  EXPECT_HAS(m, ": line 2: the token has no scopes");

  m = refusal(kOne + " ids,read,ids\n", {kOne});
  EXPECT_HAS(m, ": line 1: scope ids is given twice");

  m = refusal(kOne + " ids,\n", {kOne});
  EXPECT_HAS(m, ": line 1: scope 2 is not one of");

  m = refusal(kOne + " IDS\n", {kOne});
  EXPECT_HAS(m, ": line 1: scope 1 is not one of");

  m = refusal("short-secret ids\n", {"short-secret"});
  EXPECT_HAS(m, ": line 1: the token has 12 characters; at least 32 are needed");

  const std::string accented = "caf\xc3\xa9-0123456789abcdef0123456789abcdef";
  m = refusal(kOne + " ids\n" + accented + " ids\n", {kOne, accented, "caf"});
  EXPECT_HAS(m, ": line 2: the token may hold only visible ASCII characters (byte 3 is not one)");

  m = refusal("# nothing\n\n");
  EXPECT_HAS(m, ": holds no token");
}

// Tokens typed by hand are refused when the file is read, naming the line and the rule, never the
// token; random ones of the minimum length pass.
TEST_F(TokensTest, TokensOfLowVarietyAreRefusedByLine) {
  const std::string one_letter(32, 'a');
  std::string m = refusal("# ok\n" + kOne + " ids\n" + one_letter + " read\n", {one_letter});
  EXPECT_HAS(m, "line 3: ");
  EXPECT_HAS(m, "only 1 different character");
  const std::string two_letters = "abababababababababababababababab";
  m = refusal(two_letters + " ids\n", {"abab"});
  EXPECT_HAS(m, "line 1: ");
  EXPECT_HAS(m, "only 2 different characters (at least 6");
  const std::string repeated = "q1w2e3q1w2e3q1w2e3q1w2e3q1w2e3q1w2e3";
  m = refusal(repeated + " ids\n", {"q1w2e3"});
  EXPECT_HAS(m, "repeats a sequence of 6 characters");
  // Seven different characters, but nearly all one of them: about 38 bits.
  const std::string skewed = std::string(26, 'z') + "bcdefg";
  m = refusal(skewed + " ids\n", {"zzzz", "bcdefg"});
  EXPECT_HAS(m, "estimated 37 bits (at least 64");
  EXPECT_EQ(token_variety_fault(std::string(26, 'z') + "bcdefg"), m.substr(m.find("the token")));

  // What openssl rand gives passes: 32 hex digits, 32 decimal digits, base64.
  for (const std::string& good :
       {std::string("3f9a0c6e1b7d42e58a0f6c3d9b1e7a24"),
        std::string("80417263951730582649013572846109"),
        std::string("q0Zr+8bW/3kP1xV9sT2mN6yH4cL7dE5aJgUo="), kOne, kTwo}) {
    EXPECT_EQ(token_variety_fault(good), "") << good;
  }
  const std::filesystem::path file = write("3f9a0c6e1b7d42e58a0f6c3d9b1e7a24 ids\n", "good");
  EXPECT_TRUE(read_token_file(file).ok());
}

TEST_F(TokensTest, TheFileFollowsTheAdminTokenFilesRules) {
  const std::filesystem::path open = write(kOne + " ids\n", "open", 0644);
  Result<TokenList> r = read_token_file(open);
  ASSERT_FALSE(r.ok());
  EXPECT_HAS(r.status().message(), "has mode 0644");
  EXPECT_HAS(r.status().message(), "chmod 600");
  r = read_token_file(dir_.path());
  ASSERT_FALSE(r.ok());
  EXPECT_HAS(r.status().message(), "is not a regular file");
  r = read_token_file(dir_.path() / "missing", "--token-file");
  ASSERT_FALSE(r.ok());
  EXPECT_HAS(r.status().message(), "--token-file \"");
  EXPECT_HAS(r.status().message(), "cannot read it: No such file or directory");
  std::string big;
  while (big.size() <= (64 << 10))
    big += kOne.substr(0, 30) + std::to_string(big.size()) + " ids\n";
  r = read_token_file(write(big, "big"));
  ASSERT_FALSE(r.ok());
  EXPECT_HAS(r.status().message(), "is larger than 65536 bytes");
}

TEST_F(TokensTest, TheAdminTokenFileAddsATokenWithTheAdminScopes) {
  const std::filesystem::path listed = write(kOne + " ids,read\n", "tokens");
  const std::filesystem::path admin = write(kTwo + "\n", "admin");
  Result<TokenList> r = read_tokens(listed, admin);
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  ASSERT_EQ(r->size(), 2u);
  EXPECT_EQ((*r)[1].token, kTwo);
  EXPECT_EQ((*r)[1].scopes, kAdminTokenScopes);
  r = read_tokens(std::nullopt, admin);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->size(), 1u);
  r = read_tokens(std::nullopt, std::nullopt);
  ASSERT_TRUE(r.ok());
  EXPECT_TRUE(r->empty());

  const std::filesystem::path same = write(kTwo + " read\n", "same");
  r = read_tokens(same, admin);
  ASSERT_FALSE(r.ok());
  EXPECT_HAS(r.status().message(), "its token is also in token_file");
  EXPECT_EQ(r.status().message().find(kTwo), std::string::npos);
}

// The CLI assembles its token list with the same function (apps/flurry/server_reply.cc), its
// messages naming its own flag.
TEST_F(TokensTest, TheCliNamesItsFlagInTheSameAssembly) {
  const std::filesystem::path admin = write(kTwo + "\n", "admin");
  const std::filesystem::path same = write(kTwo + " read\n", "same");
  Result<TokenList> r = read_tokens(same, admin, "--token-file");
  ASSERT_FALSE(r.ok());
  EXPECT_HAS(r.status().message(), "its token is also in --token-file \"");
  EXPECT_EQ(r.status().message().find("in token_file"), std::string::npos) << r.status().message();
  const std::filesystem::path no_scopes = write(kOne + "\n", "no_scopes");
  r = read_tokens(no_scopes, std::nullopt, "--token-file");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().message().rfind("--token-file \"", 0), 0u) << r.status().message();
  EXPECT_HAS(r.status().message(), "line 1: the token has no scopes");
  // The same files give the same list, in the same order, whoever reads them.
  const std::filesystem::path listed = write(kOne + " ids,read\n", "tokens");
  Result<TokenList> server = read_tokens(listed, admin);
  Result<TokenList> cli = read_tokens(listed, admin, "--token-file");
  ASSERT_TRUE(server.ok() && cli.ok());
  ASSERT_EQ(server->size(), 2u);
  ASSERT_EQ(cli->size(), 2u);
  for (std::size_t i = 0; i < 2; ++i) {
    EXPECT_EQ((*server)[i].token, (*cli)[i].token);
    EXPECT_EQ((*server)[i].scopes, (*cli)[i].scopes);
  }
}

// A token granting a scope that open_scopes leaves open is warned about at start (issue 32).
TEST(ScopesTest, AGrantOfAnOpenScopeIsWarnedAboutWithTheWayToCloseIt) {
  const TokenList tokens = {{kOne, {Scope::kIds, Scope::kOrdersDecode}}, {kTwo, {Scope::kAdmin}}};
  EXPECT_EQ(granted_but_open(tokens, kDefaultOpenScopes), (ScopeSet{Scope::kIds}));
  const std::string w = open_scope_warning(tokens, kDefaultOpenScopes);
  EXPECT_HAS(w, "scopes=ids ");
  EXPECT_HAS(w, "open_scopes=ids,read ");
  EXPECT_HAS(w, "--open-scopes read,");
  EXPECT_HAS(w, "FLURRY_OPEN_SCOPES=read)");
  EXPECT_EQ(w.find(kOne), std::string::npos) << w;
  // Both open scopes granted: closing both leaves none open.
  const TokenList both = {{kOne, {Scope::kIds}}, {kTwo, {Scope::kRead}}};
  EXPECT_EQ(granted_but_open(both, kDefaultOpenScopes), kDefaultOpenScopes);
  EXPECT_HAS(open_scope_warning(both, kDefaultOpenScopes), "--open-scopes none,");
  // Nothing to say: the granted scopes are closed, or nothing is open, or there are no tokens.
  EXPECT_EQ(open_scope_warning(tokens, ScopeSet{Scope::kRead}), "");
  EXPECT_EQ(open_scope_warning(tokens, ScopeSet{}), "");
  EXPECT_EQ(open_scope_warning({}, kDefaultOpenScopes), "");
  EXPECT_EQ(open_scope_warning({{kTwo, kAdminTokenScopes}}, kDefaultOpenScopes), "");
}

TEST(ScopesTest, NamesAndOpenScopes) {
  EXPECT_EQ(parse_scope("orders:decode"), Scope::kOrdersDecode);
  EXPECT_EQ(parse_scope("Admin"), std::nullopt);
  EXPECT_EQ(to_string(ScopeSet{Scope::kRead, Scope::kIds}), "ids,read");
  EXPECT_EQ(to_string(ScopeSet{}), "none");
  EXPECT_EQ(parse_open_scopes("ids,read").value(), kDefaultOpenScopes);
  EXPECT_EQ(parse_open_scopes(" read ").value(), ScopeSet{Scope::kRead});
  EXPECT_EQ(parse_open_scopes("none").value(), ScopeSet{});
  for (const char* bad : {"", "admin", "ids,orders:decode", "ids,,read", "all"}) {
    const Result<ScopeSet> r = parse_open_scopes(bad);
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_HAS(r.status().message(), "admin and orders:decode always need a token");
  }
  EXPECT_TRUE(ScopeSet{}.has(Scope::kNone));
}

}  // namespace
}  // namespace flurry::ops
