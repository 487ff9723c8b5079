#include "registry/etcd_client.h"

#include <algorithm>
#include <array>
#include <boost/beast/http.hpp>
#include <charconv>
#include <ctime>
#include <nlohmann/json.hpp>
#include <utility>

#include "core/numbers.h"
#include "core/quote.h"
#include "tls/client.h"
#include "tls/http_client.h"

namespace flurry::internal {
namespace {

using json = nlohmann::json;

constexpr std::string_view kAuthenticatePath = "/v3/auth/authenticate";
constexpr std::chrono::milliseconds kAuthenticateTimeout{5000};

// Largest answer taken (a range over every key of a registry with millions of node IDs is far
// smaller).
constexpr std::uint64_t kMaxBody = std::uint64_t{64} << 20;

constexpr std::string_view kAlphabet =
    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

int base64_value(char c) {
  if (c >= 'A' && c <= 'Z') return c - 'A';
  if (c >= 'a' && c <= 'z') return c - 'a' + 26;
  if (c >= '0' && c <= '9') return c - '0' + 52;
  if (c == '+') return 62;
  if (c == '/') return 63;
  return -1;
}

Status malformed(std::string what) {
  return InvalidArgument(std::move(what));
}

// ---- Reading the gateway's JSON: int64 as strings, defaults left out ----

Result<json> parse_json(std::string_view body) {
  json j = json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return malformed("not JSON: " + quote(body));
  if (!j.is_object()) return malformed("not a JSON object: " + quote(body));
  return j;
}

// The member `name` of object `j`, or nullptr when absent.
const json* member(const json& j, std::string_view name) {
  auto it = j.find(name);
  return it == j.end() ? nullptr : &*it;
}

Result<std::int64_t> get_int(const json& j, std::string_view name) {
  const json* v = member(j, name);
  if (v == nullptr || v->is_null()) return std::int64_t{0};
  if (v->is_number_integer()) return v->get<std::int64_t>();
  if (v->is_string()) {
    const std::string& s = v->get_ref<const std::string&>();
    std::int64_t out = 0;
    const char* end = s.data() + s.size();
    auto [ptr, ec] = std::from_chars(s.data(), end, out);
    if (ec == std::errc() && ptr == end && !s.empty()) return out;
  }
  return malformed(std::string(name) + " is not an int64: " + quote(v->dump()));
}

Result<bool> get_bool(const json& j, std::string_view name) {
  const json* v = member(j, name);
  if (v == nullptr || v->is_null()) return false;
  if (v->is_boolean()) return v->get<bool>();
  return malformed(std::string(name) + " is not a boolean: " + quote(v->dump()));
}

// A base64 member decoded; empty when absent.
Result<std::string> get_bytes(const json& j, std::string_view name) {
  const json* v = member(j, name);
  if (v == nullptr || v->is_null()) return std::string();
  if (!v->is_string())
    return malformed(std::string(name) + " is not a string: " + quote(v->dump()));
  Result<std::string> bytes = base64_decode(v->get_ref<const std::string&>());
  if (!bytes.ok()) return malformed(std::string(name) + ": " + bytes.status().message());
  return bytes;
}

// The optional object member `name` (an empty object when absent).
Result<const json*> get_object(const json& j, std::string_view name) {
  static const json kEmpty = json::object();
  const json* v = member(j, name);
  if (v == nullptr || v->is_null()) return &kEmpty;
  if (!v->is_object())
    return malformed(std::string(name) + " is not an object: " + quote(v->dump()));
  return v;
}

Result<std::int64_t> header_revision(const json& j) {
  Result<const json*> header = get_object(j, "header");
  if (!header.ok()) return header.status();
  return get_int(**header, "revision");
}

Result<EtcdKeyValue> parse_kv(const json& j) {
  if (!j.is_object()) return malformed("a key-value is not an object: " + quote(j.dump()));
  EtcdKeyValue kv;
  Result<std::string> key = get_bytes(j, "key");
  if (!key.ok()) return key.status();
  kv.key = std::move(key).value();
  Result<std::string> value = get_bytes(j, "value");
  if (!value.ok()) return value.status();
  kv.value = std::move(value).value();
  for (auto [name, field] : {std::pair{"create_revision", &kv.create_revision},
                             std::pair{"mod_revision", &kv.mod_revision},
                             std::pair{"version", &kv.version}, std::pair{"lease", &kv.lease}}) {
    Result<std::int64_t> n = get_int(j, name);
    if (!n.ok()) return n.status();
    *field = *n;
  }
  if (kv.key.empty()) return malformed("a key-value without a key: " + quote(j.dump()));
  return kv;
}

Result<EtcdRange> parse_range_object(const json& j) {
  EtcdRange range;
  Result<std::int64_t> revision = header_revision(j);
  if (!revision.ok()) return revision.status();
  range.revision = *revision;
  if (const json* kvs = member(j, "kvs"); kvs != nullptr && !kvs->is_null()) {
    if (!kvs->is_array()) return malformed("kvs is not an array: " + quote(kvs->dump()));
    for (const json& item : *kvs) {
      Result<EtcdKeyValue> kv = parse_kv(item);
      if (!kv.ok()) return kv.status();
      range.kvs.push_back(std::move(kv).value());
    }
  }
  Result<std::int64_t> count = get_int(j, "count");
  if (!count.ok()) return count.status();
  range.count = *count;
  Result<bool> more = get_bool(j, "more");
  if (!more.ok()) return more.status();
  range.more = *more;
  return range;
}

// The first message of a (possibly streamed) answer: the text up to the first newline.
std::string_view first_message(std::string_view body) {
  const std::size_t nl = body.find('\n');
  return nl == std::string_view::npos ? body : body.substr(0, nl);
}

std::string_view target_name(EtcdCompare::Target t) {
  switch (t) {
    case EtcdCompare::Target::kCreateRevision:
      return "CREATE";
    case EtcdCompare::Target::kModRevision:
      return "MOD";
    case EtcdCompare::Target::kVersion:
      return "VERSION";
    case EtcdCompare::Target::kValue:
      return "VALUE";
    case EtcdCompare::Target::kLease:
      return "LEASE";
  }
  return "CREATE";
}

std::string_view result_name(EtcdCompare::Result r) {
  switch (r) {
    case EtcdCompare::Result::kEqual:
      return "EQUAL";
    case EtcdCompare::Result::kNotEqual:
      return "NOT_EQUAL";
    case EtcdCompare::Result::kGreater:
      return "GREATER";
    case EtcdCompare::Result::kLess:
      return "LESS";
  }
  return "EQUAL";
}

json compare_json(const EtcdCompare& c) {
  json j = {{"key", base64_encode(c.key)},
            {"target", target_name(c.target)},
            {"result", result_name(c.result)}};
  switch (c.target) {
    case EtcdCompare::Target::kCreateRevision:
      j["create_revision"] = std::to_string(c.number);
      break;
    case EtcdCompare::Target::kModRevision:
      j["mod_revision"] = std::to_string(c.number);
      break;
    case EtcdCompare::Target::kVersion:
      j["version"] = std::to_string(c.number);
      break;
    case EtcdCompare::Target::kValue:
      j["value"] = base64_encode(c.value);
      break;
    case EtcdCompare::Target::kLease:
      j["lease"] = std::to_string(c.number);
      break;
  }
  return j;
}

json op_json(const EtcdOp& op) {
  json body = {{"key", base64_encode(op.key)}};
  switch (op.kind) {
    case EtcdOp::Kind::kRange:
      if (!op.range_end.empty()) body["range_end"] = base64_encode(op.range_end);
      return {{"request_range", body}};
    case EtcdOp::Kind::kPut:
      body["value"] = base64_encode(op.value);
      if (op.lease != 0) body["lease"] = std::to_string(op.lease);
      return {{"request_put", body}};
    case EtcdOp::Kind::kDelete:
      if (!op.range_end.empty()) body["range_end"] = base64_encode(op.range_end);
      return {{"request_delete_range", body}};
  }
  return {};
}

}  // namespace

Status check_etcd_cluster_name(std::string_view name) {
  if (name.empty() || name.size() > 64) {
    return InvalidArgument("the cluster name must have 1 to 64 characters, not " +
                           std::to_string(name.size()));
  }
  for (char c : name) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                    c == '.' || c == '_' || c == '-';
    if (!ok) {
      return InvalidArgument("the cluster name " + quote(name) + " has the character " +
                             quote_char(c) + " (allowed: A-Z a-z 0-9 . _ -)");
    }
  }
  if (name == "." || name == "..")
    return InvalidArgument("the cluster name cannot be " + quote(name));
  return OkStatus();
}

std::string base64_encode(std::string_view bytes) {
  std::string out;
  out.reserve((bytes.size() + 2) / 3 * 4);
  std::size_t i = 0;
  for (; i + 3 <= bytes.size(); i += 3) {
    const std::uint32_t v = static_cast<std::uint32_t>(static_cast<unsigned char>(bytes[i])) << 16 |
                            static_cast<std::uint32_t>(static_cast<unsigned char>(bytes[i + 1]))
                                << 8 |
                            static_cast<unsigned char>(bytes[i + 2]);
    out += kAlphabet[v >> 18 & 63];
    out += kAlphabet[v >> 12 & 63];
    out += kAlphabet[v >> 6 & 63];
    out += kAlphabet[v & 63];
  }
  const std::size_t rest = bytes.size() - i;
  if (rest > 0) {
    std::uint32_t v = static_cast<std::uint32_t>(static_cast<unsigned char>(bytes[i])) << 16;
    if (rest == 2) v |= static_cast<std::uint32_t>(static_cast<unsigned char>(bytes[i + 1])) << 8;
    out += kAlphabet[v >> 18 & 63];
    out += kAlphabet[v >> 12 & 63];
    out += rest == 2 ? kAlphabet[v >> 6 & 63] : '=';
    out += '=';
  }
  return out;
}

Result<std::string> base64_decode(std::string_view text) {
  if (text.size() % 4 != 0) {
    return InvalidArgument("not base64: the length " + std::to_string(text.size()) +
                           " is not a multiple of 4");
  }
  std::string out;
  out.reserve(text.size() / 4 * 3);
  for (std::size_t i = 0; i < text.size(); i += 4) {
    const bool last = i + 4 == text.size();
    int pad = 0;
    if (last && text[i + 3] == '=') pad = text[i + 2] == '=' ? 2 : 1;
    std::uint32_t v = 0;
    for (std::size_t k = 0; k < 4; ++k) {
      const char c = text[i + k];
      int d = 0;
      if (k >= 4 - static_cast<std::size_t>(pad)) {
        if (c != '=') return InvalidArgument("not base64: bad padding");
      } else {
        d = base64_value(c);
        if (d < 0) {
          return InvalidArgument("not base64: the character " + quote_char(c) + " at " +
                                 std::to_string(i + k));
        }
      }
      v = v << 6 | static_cast<std::uint32_t>(d);
    }
    // The bits below the last encoded byte must be zero (canonical form).
    if ((pad == 1 && (v & 0xff) != 0) || (pad == 2 && (v & 0xffff) != 0)) {
      return InvalidArgument("not base64: stray bits before the padding");
    }
    out += static_cast<char>(v >> 16 & 0xff);
    if (pad < 2) out += static_cast<char>(v >> 8 & 0xff);
    if (pad < 1) out += static_cast<char>(v & 0xff);
  }
  return out;
}

std::string etcd_prefix_end(std::string_view prefix) {
  std::string end(prefix);
  while (!end.empty()) {
    auto& last = reinterpret_cast<unsigned char&>(end.back());
    if (last < 0xff) {
      ++last;
      return end;
    }
    end.pop_back();
  }
  return std::string(1, '\0');  // every key (etcd's convention); not used with a real prefix
}

std::optional<std::int64_t> parse_http_date(std::string_view text) {
  // "Sun, 06 Nov 1994 08:49:37 GMT": 29 characters.
  if (text.size() != 29 || text[3] != ',' || text[4] != ' ' || text[7] != ' ' || text[11] != ' ' ||
      text[16] != ' ' || text[19] != ':' || text[22] != ':' || text.substr(25) != " GMT") {
    return std::nullopt;
  }
  constexpr std::array<std::string_view, 12> kMonths = {"Jan", "Feb", "Mar", "Apr", "May", "Jun",
                                                        "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"};
  int month = -1;
  for (std::size_t m = 0; m < kMonths.size(); ++m) {
    if (text.substr(8, 3) == kMonths[m]) month = static_cast<int>(m);
  }
  if (month < 0) return std::nullopt;
  const auto num = [&](std::size_t at, std::size_t len, std::uint64_t max) -> std::optional<int> {
    const ParsedUint n = parse_uint(text.substr(at, len), max);
    if (!n.ok()) return std::nullopt;
    return static_cast<int>(n.value);
  };
  const auto day = num(5, 2, 31), year = num(12, 4, 9999), hour = num(17, 2, 23),
             minute = num(20, 2, 59), second = num(23, 2, 60);
  if (!day || !year || !hour || !minute || !second || *day == 0 || *year < 1970) {
    return std::nullopt;
  }
  std::tm tm{};
  tm.tm_year = *year - 1900;
  tm.tm_mon = month;
  tm.tm_mday = *day;
  tm.tm_hour = *hour;
  tm.tm_min = *minute;
  tm.tm_sec = *second;
  const std::time_t t = ::timegm(&tm);
  if (t == static_cast<std::time_t>(-1)) return std::nullopt;
  return static_cast<std::int64_t>(t) * 1000;
}

// ---- Requests ----

EtcdCompare EtcdCompare::create_revision(std::string key, std::int64_t revision) {
  return {std::move(key), Target::kCreateRevision, Result::kEqual, revision, {}};
}
EtcdCompare EtcdCompare::mod_revision(std::string key, std::int64_t revision) {
  return {std::move(key), Target::kModRevision, Result::kEqual, revision, {}};
}
EtcdCompare EtcdCompare::lease(std::string key, std::int64_t lease_id) {
  return {std::move(key), Target::kLease, Result::kEqual, lease_id, {}};
}
EtcdCompare EtcdCompare::value_equals(std::string key, std::string value) {
  return {std::move(key), Target::kValue, Result::kEqual, 0, std::move(value)};
}

EtcdOp EtcdOp::range(std::string key, std::string range_end) {
  return {Kind::kRange, std::move(key), std::move(range_end), {}, 0};
}
EtcdOp EtcdOp::put(std::string key, std::string value, std::int64_t lease) {
  return {Kind::kPut, std::move(key), {}, std::move(value), lease};
}
EtcdOp EtcdOp::remove(std::string key, std::string range_end) {
  return {Kind::kDelete, std::move(key), std::move(range_end), {}, 0};
}

std::string etcd_range_body(std::string_view key, std::string_view range_end, bool keys_only) {
  json j = {{"key", base64_encode(key)}};
  if (!range_end.empty()) j["range_end"] = base64_encode(range_end);
  if (keys_only) j["keys_only"] = true;
  return j.dump();
}

std::string etcd_txn_body(const EtcdTxn& txn) {
  json j = {{"compare", json::array()}, {"success", json::array()}, {"failure", json::array()}};
  for (const EtcdCompare& c : txn.compare) j["compare"].push_back(compare_json(c));
  for (const EtcdOp& op : txn.success) j["success"].push_back(op_json(op));
  for (const EtcdOp& op : txn.failure) j["failure"].push_back(op_json(op));
  return j.dump();
}

std::string etcd_lease_body(std::int64_t id) {
  return json{{"ID", std::to_string(id)}}.dump();
}

// ---- Answers ----

Result<EtcdRange> parse_etcd_range(std::string_view body) {
  Result<json> j = parse_json(body);
  if (!j.ok()) return j.status();
  return parse_range_object(*j);
}

Result<EtcdTxnResult> parse_etcd_txn(std::string_view body) {
  Result<json> j = parse_json(body);
  if (!j.ok()) return j.status();
  EtcdTxnResult txn;
  Result<std::int64_t> revision = header_revision(*j);
  if (!revision.ok()) return revision.status();
  txn.revision = *revision;
  Result<bool> succeeded = get_bool(*j, "succeeded");
  if (!succeeded.ok()) return succeeded.status();
  txn.succeeded = *succeeded;
  const json* responses = member(*j, "responses");
  if (responses == nullptr || responses->is_null()) return txn;
  if (!responses->is_array()) return malformed("responses is not an array");
  for (const json& r : *responses) {
    if (!r.is_object() || r.size() != 1) {
      return malformed("a txn response is not an object of one member: " + quote(r.dump()));
    }
    EtcdOpResult out;
    const auto only = r.begin();
    const std::string& name = only.key();
    const json& value = only.value();
    if (!value.is_object()) return malformed(name + " is not an object");
    if (name == "response_range") {
      out.kind = EtcdOp::Kind::kRange;
      Result<EtcdRange> range = parse_range_object(value);
      if (!range.ok()) return range.status();
      out.range = std::move(range).value();
    } else if (name == "response_put") {
      out.kind = EtcdOp::Kind::kPut;
    } else if (name == "response_delete_range") {
      out.kind = EtcdOp::Kind::kDelete;
      Result<std::int64_t> deleted = get_int(value, "deleted");
      if (!deleted.ok()) return deleted.status();
      out.deleted = *deleted;
    } else {
      return malformed("an unknown txn response " + quote(name));
    }
    txn.responses.push_back(std::move(out));
  }
  return txn;
}

Result<EtcdLeaseGrant> parse_etcd_grant(std::string_view body) {
  Result<json> j = parse_json(body);
  if (!j.ok()) return j.status();
  if (const json* error = member(*j, "error");
      error != nullptr && error->is_string() && !error->get_ref<const std::string&>().empty()) {
    return malformed("the grant failed: " + quote(error->get_ref<const std::string&>()));
  }
  EtcdLeaseGrant grant;
  Result<std::int64_t> id = get_int(*j, "ID");
  if (!id.ok()) return id.status();
  Result<std::int64_t> ttl = get_int(*j, "TTL");
  if (!ttl.ok()) return ttl.status();
  if (*id == 0) return malformed("no lease ID in the grant: " + quote(body));
  if (*ttl <= 0) return malformed("no TTL in the grant: " + quote(body));
  grant.id = *id;
  grant.ttl_seconds = *ttl;
  return grant;
}

Result<std::optional<std::int64_t>> parse_etcd_keepalive(std::string_view body) {
  Result<json> j = parse_json(first_message(body));
  if (!j.ok()) return j.status();
  const json* result = member(*j, "result");
  if (result == nullptr || !result->is_object()) {
    return malformed("no result in the keep-alive answer: " + quote(body));
  }
  Result<std::int64_t> ttl = get_int(*result, "TTL");
  if (!ttl.ok()) return ttl.status();
  if (*ttl <= 0) return std::optional<std::int64_t>();
  return std::optional<std::int64_t>(*ttl);
}

Result<EtcdLeaseTtl> parse_etcd_time_to_live(std::string_view body) {
  Result<json> j = parse_json(body);
  if (!j.ok()) return j.status();
  EtcdLeaseTtl out;
  Result<std::int64_t> ttl = get_int(*j, "TTL");
  if (!ttl.ok()) return ttl.status();
  Result<std::int64_t> granted = get_int(*j, "grantedTTL");
  if (!granted.ok()) return granted.status();
  // A lease with 0 s left has its TTL left out (the default): it is about to expire.
  out.ttl_seconds = *ttl;
  if (out.ttl_seconds < -1) return malformed("TTL " + std::to_string(*ttl));
  out.granted_ttl_seconds = *granted;
  return out;
}

std::optional<EtcdError> parse_etcd_error(std::string_view body) {
  json j = json::parse(first_message(body), nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) return std::nullopt;
  const json* error = member(j, "error");
  if (error == nullptr) return std::nullopt;
  EtcdError out;
  if (error->is_object()) {  // a stream's error
    const json* code = member(*error, "grpc_code");
    const json* message = member(*error, "message");
    if (code == nullptr || !code->is_number_integer()) return std::nullopt;
    out.code = code->get<int>();
    if (message != nullptr && message->is_string()) out.message = message->get<std::string>();
    return out;
  }
  if (!error->is_string()) return std::nullopt;
  const json* code = member(j, "code");
  if (code == nullptr || !code->is_number_integer()) return std::nullopt;
  out.code = code->get<int>();
  const json* message = member(j, "message");
  out.message = message != nullptr && message->is_string() ? message->get<std::string>()
                                                           : error->get<std::string>();
  return out;
}

std::string etcd_authenticate_body(std::string_view user, std::string_view password) {
  return json{{"name", user}, {"password", password}}.dump();
}

Result<std::string> parse_etcd_token(std::string_view body) {
  Result<json> j = parse_json(body);
  if (!j.ok()) return j.status();
  const json* token = member(*j, "token");
  if (token == nullptr || !token->is_string() || token->get_ref<const std::string&>().empty()) {
    return malformed("no token in the authenticate answer");  // never quote: it may hold one
  }
  return token->get<std::string>();
}

// ---- The client ----

EtcdClient::EtcdClient(std::vector<EtcdEndpoint> endpoints, std::chrono::milliseconds timeout,
                       std::optional<EtcdAuth> auth, std::shared_ptr<tls::ClientContext> tls)
    : endpoints_(std::move(endpoints)),
      timeout_(timeout),
      auth_(std::move(auth)),
      user_(auth_ ? auth_->user : std::string()),
      http_(std::make_shared<tls::HttpClient>(std::move(tls))) {}

std::string EtcdClient::describe() const {
  std::string out;
  for (const EtcdEndpoint& ep : endpoints_) {
    out += out.empty() ? "" : ",";
    out += ep.to_string();
  }
  return out;
}

namespace {

// etcd's answers to a token that no longer works: repeated once after authenticating again.
bool is_stale_token(const EtcdError& error) {
  return error.code == 16 ||  // UNAUTHENTICATED: "invalid auth token" (expired, unknown)
         (error.code == 3 &&  // INVALID_ARGUMENT: the auth store changed since the token was made
          error.message.find("revision of auth store is old") != std::string::npos);
}

}  // namespace

Result<EtcdClient::Answer> EtcdClient::attempt(const EtcdEndpoint& endpoint, std::string_view path,
                                               const std::string& body, const std::string& token,
                                               bool& retry_elsewhere, bool& stale_token) const {
  namespace http = boost::beast::http;

  retry_elsewhere = true;
  stale_token = false;
  const std::string where = endpoint.to_string();
  http::request<http::string_body> req{http::verb::post, std::string(path), 11};
  req.set(http::field::host, endpoint.address.to_string());
  req.set(http::field::content_type, "application/json");
  req.set(http::field::user_agent, "flurry");
  if (!token.empty()) req.set(http::field::authorization, token);
  // Over TLS the connection is kept for the next request (tls/client.h: a pool per peer, which
  // spares a handshake a request); plain HTTP makes a connection per exchange.
  req.keep_alive(endpoint.tls);
  req.body() = body;
  req.prepare_payload();
  if (endpoint.tls && http_->tls() == nullptr) {
    retry_elsewhere = false;
    return Status(StatusCode::kFailedPrecondition, where + ": an https:// endpoint without TLS");
  }
  // etcd checks a password with bcrypt, on purpose slow (tens of ms a check, seconds when many
  // clients authenticate at once on a busy host): an authentication gets more time than other
  // requests, rather than being abandoned and sent again while etcd still works on the first.
  const std::chrono::milliseconds timeout =
      path == kAuthenticatePath ? std::max(timeout_, kAuthenticateTimeout) : timeout_;
  Result<tls::HttpResponse> exchanged = http_->exchange(
      {endpoint.tls, endpoint.address.host, endpoint.address.port}, req, timeout, kMaxBody, where);
  if (!exchanged.ok()) return exchanged.status();
  const auto& res = *exchanged;
  const int http_status = res.result_int();
  std::string text = res.body();
  const std::string call = where + " " + std::string(path);
  // A 200 stream (keep-alive) may carry an error as its message.
  std::optional<EtcdError> error = parse_etcd_error(text);
  if (http_status == 200 && !error) {
    if (json::parse(first_message(text), nullptr, false).is_discarded()) {
      return Status(Reason::kIo, call + ": the answer is not JSON: " + quote(text));
    }
    Answer answer;
    answer.body = std::move(text);
    answer.endpoint = where;
    answer.date_unix_ms = parse_http_date(res[http::field::date]);
    return answer;
  }
  if (!error) {
    if (text.find("CommonName of client") != std::string::npos) {
      // etcd 3.4's gateway with --client-cert-auth refuses every client certificate with a CN.
      retry_elsewhere = false;
      return Status(StatusCode::kFailedPrecondition,
                    call + ": etcd refused the client certificate: " + quote(text, 256) +
                        " (etcd's JSON gateway takes only client certificates without a Common "
                        "Name; authenticate with etcd_user and etcd_password_file)");
    }
    return Status(Reason::kIo, call + ": HTTP " + std::to_string(http_status) + " " + quote(text) +
                                   " (is this etcd 3.4 or later?)");
  }
  const std::string what =
      call + ": etcd error " + std::to_string(error->code) + ": " + quote(error->message, 256);
  switch (error->code) {
    case 1:   // CANCELLED
    case 2:   // UNKNOWN: "context deadline exceeded" while the member has no leader
    case 4:   // DEADLINE_EXCEEDED
    case 14:  // UNAVAILABLE: no leader, leader changed, request timed out
      return Status(Reason::kIo, what);
    default:
      break;
  }
  if (http_status >= 500) return Status(Reason::kIo, what);
  retry_elsewhere = false;
  const std::string user = auth_ ? "user " + quote(auth_->user) : std::string("no user");
  if (is_stale_token(*error)) {
    stale_token = true;
    return Status(StatusCode::kUnauthenticated, what + ": etcd refused the token of " + user);
  }
  const auto says = [&](std::string_view text) {
    return error->message.find(text) != std::string::npos;
  };
  switch (error->code) {
    case 3:  // INVALID_ARGUMENT: etcd's authentication errors among others
      if (says("user name is empty")) {
        return Status(StatusCode::kUnauthenticated,
                      what +
                          ": etcd requires authentication; set etcd_user and "
                          "etcd_password_file");
      }
      if (says("authentication failed")) {
        return Status(StatusCode::kUnauthenticated,
                      "etcd refused " + user +
                          ": authentication failed (wrong password or unknown user; " + what + ")");
      }
      return Status(StatusCode::kInternal, what);
    case 9:  // FAILED_PRECONDITION: "authentication is not enabled"
      if (says("authentication is not enabled")) {
        return Status(StatusCode::kFailedPrecondition,
                      "etcd_user " + (auth_ ? quote(auth_->user) : std::string()) +
                          " is set but etcd has authentication disabled (" + what +
                          "); enable it (etcdctl auth enable) or unset etcd_user");
      }
      return Status(StatusCode::kInternal, what);
    case 5:  // NOT_FOUND: the lease is not found
      return Status(StatusCode::kNotFound, what);
    case 7:          // PERMISSION_DENIED: the user's roles do not cover the key
      if (!auth_) {  // what etcd with authentication and client certificates says to no user
        return Status(StatusCode::kUnauthenticated,
                      what +
                          ": etcd requires authentication (it denies requests without a user); "
                          "set etcd_user and etcd_password_file");
      }
      return Status(StatusCode::kPermissionDenied,
                    what + ": etcd denied " + user + " " + std::string(path) +
                        (auth_ && !auth_->needs.empty() ? "; its role needs " + auth_->needs
                                                        : std::string()));
    case 8:  // RESOURCE_EXHAUSTED: too many requests, database space exceeded
      return Status(StatusCode::kUnavailable, what);
    default:
      return Status(StatusCode::kInternal, what);
  }
}

Result<EtcdClient::Answer> EtcdClient::post_with(std::string_view path, const std::string& body,
                                                 const std::string& token,
                                                 bool& stale_token) const {
  const std::size_t n = endpoints_.size();
  if (n == 0) return Status(StatusCode::kInternal, "etcd: no endpoints");
  const std::size_t first = preferred_.load(std::memory_order_relaxed) % n;
  std::string failures;
  for (std::size_t k = 0; k < n; ++k) {
    const std::size_t i = (first + k) % n;
    bool retry_elsewhere = false;
    Result<Answer> answer = attempt(endpoints_[i], path, body, token, retry_elsewhere, stale_token);
    if (answer.ok()) {
      preferred_.store(i, std::memory_order_relaxed);
      return answer;
    }
    if (!retry_elsewhere) return answer.status();
    failures += failures.empty() ? "" : "; ";
    failures += answer.status().message();
  }
  return Status(Reason::kIo,
                "no etcd endpoint answered " + std::string(path) + " (" + failures + ")");
}

Result<std::string> EtcdClient::token(const std::string& refused) const {
  std::lock_guard lock(auth_mu_);
  if (!token_.empty() && token_ != refused) return token_;
  constexpr std::string_view kPath = kAuthenticatePath;
  authentications_.fetch_add(1, std::memory_order_relaxed);
  bool stale_token = false;
  Result<Answer> a = post_with(kPath, etcd_authenticate_body(auth_->user, auth_->password),
                               std::string(), stale_token);
  if (!a.ok()) {
    if (a.status().code() == StatusCode::kUnauthenticated ||
        a.status().code() == StatusCode::kFailedPrecondition) {
      return a.status();
    }
    return a.status().with_prefix("cannot authenticate to etcd as user " + quote(auth_->user));
  }
  Result<std::string> token = parse_etcd_token(a->body);
  if (!token.ok()) {
    return Status(StatusCode::kInternal, "etcd " + a->endpoint + " answered " + std::string(kPath) +
                                             " unexpectedly: " + token.status().message());
  }
  token_ = std::move(token).value();
  return token_;
}

Result<EtcdClient::Answer> EtcdClient::post(std::string_view path, const std::string& body) const {
  bool stale_token = false;
  if (!auth_) return post_with(path, body, std::string(), stale_token);
  Result<std::string> current = token(std::string());
  if (!current.ok()) return current.status();
  Result<Answer> answer = post_with(path, body, *current, stale_token);
  if (answer.ok() || !stale_token) return answer;
  // The token expired or went stale: authenticate again (unless another request did meanwhile)
  // and repeat the request once. Refused again, the answer stays UNAUTHENTICATED.
  Result<std::string> fresh = token(*current);
  if (!fresh.ok()) return fresh.status();
  return post_with(path, body, *fresh, stale_token);
}

namespace {

// A parser's INVALID_ARGUMENT as the INTERNAL error of an unexpected answer from `answer`.
template <typename T>
Result<T> from(const EtcdClient::Answer& answer, std::string_view path, Result<T> parsed) {
  if (parsed.ok()) return parsed;
  return Status(StatusCode::kInternal, "etcd " + answer.endpoint + " answered " +
                                           std::string(path) +
                                           " unexpectedly: " + parsed.status().message());
}

}  // namespace

Result<EtcdRange> EtcdClient::range(std::string_view key, std::string_view range_end,
                                    bool keys_only) const {
  constexpr std::string_view kPath = "/v3/kv/range";
  Result<Answer> a = post(kPath, etcd_range_body(key, range_end, keys_only));
  if (!a.ok()) return a.status();
  return from(*a, kPath, parse_etcd_range(a->body));
}

Result<EtcdTxnResult> EtcdClient::txn(const EtcdTxn& txn) const {
  constexpr std::string_view kPath = "/v3/kv/txn";
  Result<Answer> a = post(kPath, etcd_txn_body(txn));
  if (!a.ok()) return a.status();
  Result<EtcdTxnResult> r = from(*a, kPath, parse_etcd_txn(a->body));
  if (!r.ok()) return r;
  const std::size_t expected = r->succeeded ? txn.success.size() : txn.failure.size();
  if (r->responses.size() != expected) {
    return Status(StatusCode::kInternal, "etcd " + a->endpoint + " answered " + std::string(kPath) +
                                             " with " + std::to_string(r->responses.size()) +
                                             " responses for " + std::to_string(expected) +
                                             " operations");
  }
  return r;
}

Result<EtcdLeaseGrant> EtcdClient::grant(std::int64_t ttl_seconds) const {
  constexpr std::string_view kPath = "/v3/lease/grant";
  Result<Answer> a = post(kPath, json{{"TTL", std::to_string(ttl_seconds)}}.dump());
  if (!a.ok()) return a.status();
  return from(*a, kPath, parse_etcd_grant(a->body));
}

Result<std::optional<std::int64_t>> EtcdClient::keep_alive(std::int64_t id) const {
  constexpr std::string_view kPath = "/v3/lease/keepalive";
  Result<Answer> a = post(kPath, etcd_lease_body(id));
  if (!a.ok()) return a.status();
  return from(*a, kPath, parse_etcd_keepalive(a->body));
}

Status EtcdClient::revoke(std::int64_t id) const {
  Result<Answer> a = post("/v3/lease/revoke", etcd_lease_body(id));
  return a.status();
}

Result<EtcdClient::TimeToLive> EtcdClient::time_to_live(std::int64_t id) const {
  constexpr std::string_view kPath = "/v3/lease/timetolive";
  Result<Answer> a = post(kPath, etcd_lease_body(id));
  if (!a.ok()) return a.status();
  Result<EtcdLeaseTtl> ttl = from(*a, kPath, parse_etcd_time_to_live(a->body));
  if (!ttl.ok()) return ttl.status();
  return TimeToLive{*ttl, a->date_unix_ms};
}

}  // namespace flurry::internal

namespace flurry {

std::string EtcdEndpoint::to_string() const {
  return (tls ? "https://" : "") + address.to_string();
}

Result<EtcdEndpoint> parse_etcd_endpoint(std::string_view text) {
  EtcdEndpoint out;
  std::string_view rest = text;
  if (rest.substr(0, 8) == "https://") {
    out.tls = true;
    rest.remove_prefix(8);
  } else if (rest.substr(0, 7) == "http://") {
    rest.remove_prefix(7);
  } else if (rest.find("://") != std::string_view::npos) {
    return InvalidArgument("etcd endpoint " + internal::quote_redacted(text) +
                           ": only http:// and https:// endpoints are known");
  }
  // Credentials in the endpoint are refused and never shown: an etcd user is etcd_user, its
  // password is read from etcd_password_file.
  if (rest.find('@') != std::string_view::npos) {
    return InvalidArgument("etcd endpoint " + internal::quote_redacted(text) +
                           ": user information in an endpoint is not used; give the user as "
                           "etcd_user and its password in etcd_password_file");
  }
  if (!rest.empty() && rest.back() == '/') rest.remove_suffix(1);  // "https://h:2379/"
  if (rest.find_first_of("/?#") != std::string_view::npos) {
    return InvalidArgument("etcd endpoint " + internal::quote_redacted(text) +
                           ": has a path or query; give only the scheme, host and port");
  }
  Result<HostPort> address = parse_host_port(rest, HostPortUse::kConnect);
  if (!address.ok()) return address.status();
  out.address = std::move(address).value();
  return out;
}

}  // namespace flurry
