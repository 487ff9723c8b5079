// Bearer tokens and their scopes: the token file (token_file), the single admin token file
// (admin_token_file) and the one reader of both, for the server and the CLI alike.
//
// A token file holds one token per line followed by its scopes, separated by commas:
//
//   # the order service issues and decodes
//   3b0c...e1 ids,orders:decode
//
// Blank lines and lines whose first non-blank character is '#' are skipped. A token is at least
// kMinTokenLength visible ASCII characters (what an Authorization header can carry) of enough
// variety (token_variety_fault); each token appears once. The file must be a regular file readable
// by its owner only (mode 0600 or stricter), as every secret file flurry reads. No message ever
// quotes a token, or any other text of the file: errors name the file, the line number and what is
// wrong.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "flurry/status.h"

namespace flurry::ops {

// What a token lets a caller do (docs/operations.md, "Tokens and scopes").
enum class Scope : std::uint8_t {
  kNone = 0,          // needs no token (health, readiness, metrics)
  kIds = 1,           // issue IDs and order numbers
  kRead = 2,          // read the server's state: layout, decode an ID, tags, nodes, status, events
  kAdmin = 4,         // change it: create segment tags
  kOrdersDecode = 8,  // decode order numbers
};

// A set of scopes, as a bit mask of Scope values.
class ScopeSet {
 public:
  constexpr ScopeSet() = default;
  constexpr ScopeSet(std::initializer_list<Scope> scopes) {
    for (Scope s : scopes) bits_ |= static_cast<std::uint8_t>(s);
  }
  // kNone is in every set.
  [[nodiscard]] constexpr bool has(Scope scope) const noexcept {
    return (bits_ & static_cast<std::uint8_t>(scope)) == static_cast<std::uint8_t>(scope);
  }
  constexpr void add(Scope scope) noexcept { bits_ |= static_cast<std::uint8_t>(scope); }
  [[nodiscard]] constexpr std::uint8_t bits() const noexcept { return bits_; }
  [[nodiscard]] static constexpr ScopeSet of_bits(std::uint8_t bits) noexcept {
    ScopeSet s;
    s.bits_ = bits;
    return s;
  }
  friend constexpr bool operator==(ScopeSet, ScopeSet) = default;

 private:
  std::uint8_t bits_ = 0;
};

// The scopes admin_token_file's token has: everything an admin could do before scopes existed.
inline constexpr ScopeSet kAdminTokenScopes = {Scope::kAdmin, Scope::kOrdersDecode};
// What needs no token unless the operator says otherwise (open_scopes): issuing and reading.
inline constexpr ScopeSet kDefaultOpenScopes = {Scope::kIds, Scope::kRead};

// "ids", "read", "admin", "orders:decode"; "" for kNone.
[[nodiscard]] std::string_view to_string(Scope scope) noexcept;
// The scope named `name` exactly (lower case), or nullopt.
[[nodiscard]] std::optional<Scope> parse_scope(std::string_view name) noexcept;
// "ids,read" in Scope order; "none" for the empty set.
[[nodiscard]] std::string to_string(ScopeSet scopes);

// The open_scopes setting: "none", or a comma-separated list of ids and read (blanks around
// names allowed). INVALID_ARGUMENT (without key or source: the caller adds them) for another
// name; admin and orders:decode always need a token, so naming them is refused too.
[[nodiscard]] Result<ScopeSet> parse_open_scopes(std::string_view text);

// The shortest token the readers accept.
inline constexpr std::size_t kMinTokenLength = 32;
// The shortest admin token read_admin_token accepts (the same rule).
inline constexpr std::size_t kMinAdminTokenLength = kMinTokenLength;
// The fewest different characters a token must hold.
inline constexpr std::size_t kMinTokenDistinct = 6;
// The least estimated entropy of a token, in bits: its length times the Shannon entropy of its
// characters' frequencies (32 random hex digits give about 117, none below 85 in 200,000
// tries; 32 random decimal digits about 100).
inline constexpr double kMinTokenBits = 64;

// A token that is one sequence of at most this many characters over and over is refused.
inline constexpr std::size_t kMaxTokenPeriod = 8;

// Why `token` is too regular to be a secret, "" when it is not: fewer than kMinTokenDistinct
// different characters; one sequence of at most kMaxTokenPeriod characters repeated
// ("abcdefabcdef..."); or less than kMinTokenBits estimated entropy. These catch tokens typed by
// hand, not every pattern ("0123456789abcdef" twice passes): tokens should come from a random
// generator. A token from `openssl rand -hex 32` or `-base64 32` passes (no 32 random hex
// digits failed in 200,000 tries). The text never quotes the token.
[[nodiscard]] std::string token_variety_fault(std::string_view token);

// One configured token. A secret: kept by the authorizer only, never logged.
struct TokenEntry {
  std::string token;
  ScopeSet scopes;
};

// The tokens a server accepts, in file order (token_file's lines, then admin_token_file's token).
using TokenList = std::vector<TokenEntry>;

// The admin token in `file`: its contents without surrounding whitespace. The one reader of
// admin tokens, for the server (admin_token_file) and the CLI (--admin-token-file), so that both
// accept the same tokens. INVALID_ARGUMENT naming the file (never quoting its contents) when it
// cannot be read, is not a regular file, is readable or writable by group or others (the message
// gives its mode and says chmod 600), is empty, is larger than 4 KiB, holds a character that
// cannot be sent in an Authorization header (only visible ASCII) or a token shorter than
// kMinAdminTokenLength.
[[nodiscard]] Result<std::string> read_admin_token(const std::filesystem::path& file);

// The tokens of a token file (format above), in line order. The file is read as
// read_admin_token reads its own (same permission, type and token rules; up to 64 KiB).
// INVALID_ARGUMENT "token_file '<file>': line N: ..." for a line without scopes, an unknown or
// repeated scope, a token too short or with a character other than visible ASCII, a token that
// an earlier line has (naming that line), or a file without any token. `setting` names the file
// in messages ("token_file", or the CLI's "--token-file").
[[nodiscard]] Result<TokenList> read_token_file(const std::filesystem::path& file,
                                                std::string_view setting = "token_file");

// The tokens of both files, either optional: token_file's, then admin_token_file's token with
// kAdminTokenScopes. The one assembly of a token list, for the server and the CLI alike.
// INVALID_ARGUMENT as the readers above; also when the admin token is one token_file lists.
// `token_setting` names token_file in messages (the CLI's "--token-file").
[[nodiscard]] Result<TokenList> read_tokens(const std::optional<std::filesystem::path>& token_file,
                                            const std::optional<std::filesystem::path>& admin_file,
                                            std::string_view token_setting = "token_file");

// The scopes some token in `tokens` grants that `open` serves without any token anyway: such a
// grant changes nothing, which an operator who wrote it most likely did not mean. Empty when none.
[[nodiscard]] ScopeSet granted_but_open(const TokenList& tokens, ScopeSet open) noexcept;
// The start's (and a reload's) warning about granted_but_open, as log fields: `scopes=ids
// open_scopes=ids,read message="..."`, the message saying what it means and the open_scopes
// value that closes them (with its flag and variable). "" when there is nothing to say. Never
// names a token.
[[nodiscard]] std::string open_scope_warning(const TokenList& tokens, ScopeSet open);

// The first token in `tokens` that has `scope` (for a CLI that sends one), or nullptr.
[[nodiscard]] const TokenEntry* token_with(const TokenList& tokens, Scope scope) noexcept;

}  // namespace flurry::ops
