// The configuration loader of `flurry serve`: documented defaults, the precedence flags >
// FLURRY_* environment > TOML file > defaults, errors that name the key and where the value came
// from, the rules across keys, to_toml round trips and listen address parsing. TOML files are
// real files in a temporary directory.
#include "app/config.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "test_store.h"

namespace flurry::app {
namespace {

using testing::TempDir;

class ConfigTest : public ::testing::Test {
 protected:
  // Writes `text` to a file in the temporary directory and returns its path.
  std::string write_file(const std::string& text, const std::string& name = "flurry.toml") {
    const std::string path = (dir_.path() / name).string();
    std::ofstream out(path, std::ios::binary);
    out << text;
    return path;
  }

  // A file of `text` readable by its owner only, as admin token files must be.
  std::string token_file(const std::string& text, const std::string& name) {
    const std::string path = write_file(text, name);
    EXPECT_EQ(::chmod(path.c_str(), 0600), 0);
    return path;
  }

  static FlagValue flag(std::string_view key, std::string value) {
    std::string name = "--";
    for (char ch : key) name += ch == '_' ? '-' : ch;
    return FlagValue{std::string(key), name, std::move(value)};
  }

  // Loads and expects INVALID_ARGUMENT; returns the message.
  static std::string load_error(const ConfigInputs& inputs) {
    Result<LoadedConfig> r = load_config(inputs);
    EXPECT_FALSE(r.ok());
    if (r.ok()) return "";
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument) << r.status().to_string();
    return r.status().message();
  }

  static Config load_ok(const ConfigInputs& inputs) {
    Result<LoadedConfig> r = load_config(inputs);
    EXPECT_TRUE(r.ok()) << r.status().to_string();
    return r.ok() ? r->config : Config{};
  }

  TempDir dir_;
};

// The layout as the user wrote a preset (its name) or as its canonical text.
std::string layout_text(const Config& c) {
  const Layout& l = c.service.layout;
  return l.preset_name().empty() ? l.to_string() : l.preset_name();
}

// Every setting of `c` as to_toml() writes it, one line each.
std::string settings_text(const Config& c) {
  return to_toml(c);
}

void expect_same(const Config& a, const Config& b) {
  EXPECT_EQ(settings_text(a), settings_text(b));
  EXPECT_EQ(a.service.layout, b.service.layout);
  EXPECT_EQ(a.service.registry.data_dir, b.service.registry.data_dir);
}

#define EXPECT_HAS(haystack, needle) \
  EXPECT_NE(std::string(haystack).find(needle), std::string::npos) << (haystack)

TEST_F(ConfigTest, DefaultsAreTheDocumentedOnes) {
  const Config c = load_ok({});
  EXPECT_EQ(c.http.listen.to_string(), "127.0.0.1:7609");
  // Absolute, so that the working directory never becomes part of the registry's identity.
  EXPECT_EQ(c.service.registry.data_dir, default_data_dir());
  EXPECT_TRUE(c.service.registry.data_dir.is_absolute()) << c.service.registry.data_dir;
  EXPECT_EQ(std::string(to_string(c.service.registry.kind)), "sqlite");
  EXPECT_FALSE(c.service.registry.node.has_value());
  EXPECT_FALSE(c.service.registry.node_from_hostname);
  EXPECT_TRUE(c.service.registry.etcd_endpoints.empty());
  EXPECT_EQ(c.service.registry.cluster, "default");
  EXPECT_EQ(layout_text(c), "flurry");
  EXPECT_EQ(c.service.registry.lease_ttl.count(), 10000u);
  EXPECT_EQ(std::string(to_string(c.service.rollback)), "wait");
  EXPECT_EQ(c.service.max_lead.count(), 1000u);
  EXPECT_EQ(c.service.max_wait.count(), 3000u);
  EXPECT_EQ(c.service.horizon_window.count(), 2000u);
  EXPECT_EQ(c.service.max_batch, 100000u);
  EXPECT_EQ(c.http.response_budget, std::uint64_t{64} << 20);
  EXPECT_EQ(c.http.io_threads, http::default_io_threads());
  EXPECT_GE(http::default_io_threads(), 1u);
  EXPECT_EQ(std::string(to_string(c.log_level)), "info");
  const Config defaults;
  expect_same(c, defaults);
  EXPECT_TRUE(check_service_options(defaults.service).ok());
}

TEST_F(ConfigTest, OneTableDescribesEveryKey) {
  const auto all = settings();
  ASSERT_EQ(all.size(), 57u);
  EXPECT_EQ(all.front().key, "listen");
  EXPECT_EQ(all.back().key, "log_level");
  const Config defaults;
  const std::string toml = to_toml(defaults);
  for (const SettingInfo& s : all) {
    SCOPED_TRACE(std::string(s.key));
    // The flag and the variable are spelled from the key.
    std::string flag = "--", env = "FLURRY_";
    for (char ch : s.key) {
      flag += ch == '_' ? '-' : ch;
      env += static_cast<char>(std::toupper(static_cast<unsigned char>(ch)));
    }
    EXPECT_EQ(s.flag, flag);
    EXPECT_EQ(s.env, env);
    EXPECT_FALSE(s.help.empty());
    // Every key is printed by --print-config (node as a comment while unset).
    EXPECT_HAS(toml, std::string(s.key) + " = ");
  }
  // The help states the real defaults, including the one that depends on the machine.
  const auto help_of = [&](std::string_view key) {
    for (const SettingInfo& s : all) {
      if (s.key == key) return s.help;
    }
    return std::string();
  };
  EXPECT_HAS(help_of("io_threads"), "(default " + std::to_string(http::default_io_threads()) + ")");
  EXPECT_HAS(help_of("lease_ttl_ms"), "(default 10000)");
  EXPECT_HAS(help_of("layout"), "flurry");
  EXPECT_EQ(help_of("node").find("default"), std::string::npos);  // none: unset
  EXPECT_EQ(help_of("etcd_endpoints").find("default"), std::string::npos);
  EXPECT_HAS(help_of("cluster"), "(default 'default')");
  EXPECT_HAS(help_of("registry"), "etcd");
}

// examples/flurry.toml documents every key with its default: it loads to the defaults, and
// names each key (as a setting or, for those without a fixed default, a comment).
TEST_F(ConfigTest, ExampleFileHasEveryKeyAtItsDefault) {
  ConfigInputs in;
  in.file = FLURRY_EXAMPLE_CONFIG;
  const Config defaults;
  expect_same(load_ok(in), defaults);
  std::ifstream file(FLURRY_EXAMPLE_CONFIG);
  const std::string text((std::istreambuf_iterator<char>(file)), std::istreambuf_iterator<char>());
  for (const SettingInfo& s : settings()) {
    const std::string key(s.key);
    EXPECT_TRUE(text.find("\n" + key + " = ") != std::string::npos ||
                text.find("\n# " + key + " = ") != std::string::npos)
        << key;
  }
}

// TLS: off by default; the three files from any source, written back by --print-config; a
// certificate without its key (or the reverse) and a client CA without TLS are refused.
TEST_F(ConfigTest, TlsFilesTogetherOrNotAtAll) {
  const Config defaults = load_ok({});
  EXPECT_FALSE(defaults.tls.enabled());
  EXPECT_FALSE(defaults.tls.client_ca_file.has_value());

  ConfigInputs in;
  in.env = {{"FLURRY_TLS_CERT_FILE", "/etc/flurry/server.pem"}};
  in.flags = {flag("tls_key_file", "/etc/flurry/server.key"),
              flag("tls_client_ca_file", "/etc/flurry/clients.pem")};
  const Config on = load_ok(in);
  EXPECT_TRUE(on.tls.enabled());
  EXPECT_EQ(on.tls.cert_file, std::filesystem::path("/etc/flurry/server.pem"));
  EXPECT_EQ(on.tls.key_file, std::filesystem::path("/etc/flurry/server.key"));
  EXPECT_EQ(on.tls.client_ca_file, std::filesystem::path("/etc/flurry/clients.pem"));
  const std::string toml = to_toml(on);
  EXPECT_HAS(toml, "tls_cert_file = '/etc/flurry/server.pem'");
  EXPECT_HAS(toml, "tls_client_ca_file = '/etc/flurry/clients.pem'");

  ConfigInputs cert_only;
  cert_only.flags = {flag("tls_cert_file", "/etc/flurry/server.pem")};
  std::string m = load_error(cert_only);
  EXPECT_HAS(m, "tls_cert_file is set but tls_key_file is not");
  EXPECT_HAS(m, "flag --tls-cert-file");
  ConfigInputs key_only;
  key_only.env = {{"FLURRY_TLS_KEY_FILE", "/etc/flurry/server.key"}};
  EXPECT_HAS(load_error(key_only), "tls_key_file is set but tls_cert_file is not");
  ConfigInputs ca_only;
  ca_only.flags = {flag("tls_client_ca_file", "/etc/flurry/clients.pem")};
  EXPECT_HAS(load_error(ca_only), "client certificates are checked only over TLS");
}

// allowed_hosts: none by default; from the file, the environment or a flag (which wins), kept in
// lower case without a trailing dot, written back by --print-config; a bad name is refused with
// its source.
TEST_F(ConfigTest, AllowedHostsFromEverySource) {
  EXPECT_TRUE(load_ok({}).http.allowed_hosts.empty());
  ConfigInputs in;
  in.file = write_file("allowed_hosts = \"Ids.Example.com., flurry\"\n");
  Config c = load_ok(in);
  EXPECT_EQ(c.http.allowed_hosts, (std::vector<std::string>{"ids.example.com", "flurry"}));
  EXPECT_HAS(to_toml(c), "allowed_hosts = 'ids.example.com,flurry'");
  in.env = {{"FLURRY_ALLOWED_HOSTS", "env.example"}};
  EXPECT_EQ(load_ok(in).http.allowed_hosts, (std::vector<std::string>{"env.example"}));
  in.flags = {flag("allowed_hosts", "*")};
  EXPECT_EQ(load_ok(in).http.allowed_hosts, (std::vector<std::string>{"*"}));
  ConfigInputs bad;
  bad.flags = {flag("allowed_hosts", "a.example,http://b.example")};
  const std::string m = load_error(bad);
  EXPECT_HAS(m, "allowed_hosts");
  EXPECT_HAS(m, "\"http://b.example\" is not a host name");
  EXPECT_HAS(m, "flag --allowed-hosts");
}

// gRPC listens beside HTTP by default; an empty grpc_listen from any source turns it off, and
// --print-config writes that back so that it reads the same again.
TEST_F(ConfigTest, GrpcListenDefaultsOnAndEmptyTurnsItOff) {
  const Config defaults = load_ok({});
  ASSERT_TRUE(defaults.grpc.listen.has_value());
  EXPECT_EQ(defaults.grpc.listen->to_string(), "127.0.0.1:7610");
  EXPECT_EQ(defaults.grpc.max_range, 1'000'000'000u);

  ConfigInputs env;
  env.env = {{"FLURRY_GRPC_LISTEN", ""}};
  const Config off = load_ok(env);
  EXPECT_FALSE(off.grpc.listen.has_value());
  ConfigInputs back;
  back.file = write_file(to_toml(off));
  EXPECT_FALSE(load_ok(back).grpc.listen.has_value());

  ConfigInputs flags;
  flags.flags = {flag("grpc_listen", "[::1]:0"), flag("grpc_max_streams", "7")};
  const Config set = load_ok(flags);
  ASSERT_TRUE(set.grpc.listen.has_value());
  EXPECT_EQ(set.grpc.listen->to_string(), "[::1]:0");
  EXPECT_EQ(set.grpc.max_concurrent_streams, 7u);

  ConfigInputs bad;
  bad.flags = {flag("grpc_listen", "7610")};
  std::string m = load_error(bad);
  EXPECT_HAS(m, "grpc_listen");
  EXPECT_HAS(m, "is not host:port");
  ConfigInputs range;
  range.env = {{"FLURRY_GRPC_MAX_RANGE", "0"}};
  m = load_error(range);
  EXPECT_HAS(m, "grpc_max_range");
  EXPECT_HAS(m, "FLURRY_GRPC_MAX_RANGE");
}

TEST_F(ConfigTest, TimestampOracleSettings) {
  const Config defaults = load_ok({});
  EXPECT_FALSE(defaults.tso.enabled);
  EXPECT_FALSE(defaults.tso.advertise.has_value());
  ConfigInputs on;
  on.flags = {flag("tso", "true"), flag("tso_advertise", "ids-3.example")};
  const Config set = load_ok(on);
  EXPECT_TRUE(set.tso.enabled);
  ASSERT_TRUE(set.tso.advertise.has_value());
  EXPECT_EQ(*set.tso.advertise, "ids-3.example");
  ConfigInputs v6;
  v6.env = {{"FLURRY_TSO_ADVERTISE", "fd00::7"}};
  EXPECT_EQ(load_ok(v6).tso.advertise.value_or(""), "fd00::7");
  ConfigInputs bad;
  bad.flags = {flag("tso_advertise", "host:80/x")};
  const std::string m = load_error(bad);
  EXPECT_HAS(m, "tso_advertise");
  EXPECT_HAS(m, "not a host name or IP address");
}

TEST_F(ConfigTest, FlagsBeatEnvironmentBeatsFileBeatsDefaults) {
  ConfigInputs in;
  in.file = write_file(
      "lease_ttl_ms = 2000\n"
      "max_batch = 500\n"
      "log_level = \"debug\"\n"
      "data_dir = \"/from/file\"\n");
  in.env = {{"FLURRY_LEASE_TTL_MS", "3000"},
            {"FLURRY_LOG_LEVEL", "warn"},
            {"HOME", "/root"},
            {"NOT_FLURRY_X", "1"}};
  in.flags = {flag("lease_ttl_ms", "4000")};
  const Config c = load_ok(in);
  EXPECT_EQ(c.service.registry.lease_ttl.count(), 4000u);         // flag
  EXPECT_EQ(std::string(to_string(c.log_level)), "warn");         // environment over file
  EXPECT_EQ(c.service.max_batch, 500u);                           // file
  EXPECT_EQ(c.service.registry.data_dir.string(), "/from/file");  // file
  EXPECT_EQ(c.service.max_wait.count(), 3000u);                   // default
  EXPECT_EQ(c.http.listen.to_string(), "127.0.0.1:7609");         // default

  // Without the flag the environment wins; without both the file.
  in.flags.clear();
  EXPECT_EQ(load_ok(in).service.registry.lease_ttl.count(), 3000u);
  in.env.clear();
  EXPECT_EQ(load_ok(in).service.registry.lease_ttl.count(), 2000u);
  EXPECT_EQ(std::string(to_string(load_ok(in).log_level)), "debug");
}

TEST_F(ConfigTest, FlagsAndEnvironmentForEveryKind) {
  ConfigInputs in;
  in.env = {{"FLURRY_LISTEN", "0.0.0.0:8080"},
            {"FLURRY_REGISTRY", "static"},
            {"FLURRY_NODE", "7"},
            {"FLURRY_LAYOUT", "multiclock"},
            {"FLURRY_ROLLBACK", "clock"}};
  in.flags = {flag("io_threads", "3"), flag("body_limit", "0"), flag("listen", "[::1]:0")};
  const Config c = load_ok(in);
  EXPECT_EQ(c.http.listen.to_string(), "[::1]:0");
  EXPECT_EQ(std::string(to_string(c.service.registry.kind)), "static");
  EXPECT_EQ(c.service.registry.node, 7u);
  EXPECT_EQ(layout_text(c), "multiclock");
  EXPECT_EQ(std::string(to_string(c.service.rollback)), "clock");
  EXPECT_EQ(c.http.io_threads, 3u);
  EXPECT_EQ(c.http.body_limit, 0u);

  ConfigInputs b;
  b.env = {{"FLURRY_REGISTRY", "static"}, {"FLURRY_NODE_FROM_HOSTNAME", "1"}};
  EXPECT_TRUE(load_ok(b).service.registry.node_from_hostname);
  b.env[1].second = "true";
  EXPECT_TRUE(load_ok(b).service.registry.node_from_hostname);
  b.flags = {flag("registry", "sqlite"), flag("node_from_hostname", "false")};
  EXPECT_FALSE(load_ok(b).service.registry.node_from_hostname);

  ConfigInputs p;
  p.env = {{"FLURRY_REGISTRY", "postgres"},
           {"FLURRY_POSTGRES_URL", "postgresql://flurry@db.example:5432/ids"}};
  Config pc = load_ok(p);
  EXPECT_EQ(std::string(to_string(pc.service.registry.kind)), "postgres");
  EXPECT_EQ(pc.service.registry.postgres_url, "postgresql://flurry@db.example:5432/ids");
  p.flags = {flag("postgres_url", "host=db.example dbname=ids")};
  EXPECT_EQ(load_ok(p).service.registry.postgres_url, "host=db.example dbname=ids");
}

// --print-config (to_toml) never writes a secret: passwords and sslpassword in postgres_url and
// in every PostgreSQL entry of segment_stores, URL and key=value forms, percent-encoded too.
TEST_F(ConfigTest, PrintedConfigurationMasksEverySecret) {
  ConfigInputs in;
  in.env = {{"FLURRY_REGISTRY", "postgres"},
            {"FLURRY_POSTGRES_URL",
             "postgresql://flurry:url-pw-1@db:5432/ids?sslpassword=key%2Dpw-2&sslmode=require"}};
  in.flags = {flag("segment_stores",
                   "sqlite, host=db password='kv pw-3' dbname=a sslpassword=kv-pw-4, "
                   "postgres://u:p%40ss-5@db/b?password=q-pw-6")};
  const std::string toml = to_toml(load_ok(in));
  for (const char* secret :
       {"url-pw-1", "key%2Dpw-2", "key-pw-2", "pw-3", "kv-pw-4", "p%40ss-5", "p@ss-5", "q-pw-6"}) {
    EXPECT_EQ(toml.find(secret), std::string::npos) << secret << "\n" << toml;
  }
  EXPECT_HAS(toml, "postgresql://flurry:***@db:5432/ids?sslpassword=***&sslmode=require");
  EXPECT_HAS(toml,
             "sqlite, host=db password='***' dbname=a sslpassword=***, "
             "postgres://u:***@db/b?password=***");

  in.env[1].second = "host=db dbname=ids sslpassword=s3cret-key";
  EXPECT_HAS(to_toml(load_ok(in)), "host=db dbname=ids sslpassword=***");
}

TEST_F(ConfigTest, PostgresRegistryNeedsAWellFormedUrlAndOnlyIt) {
  ConfigInputs in;
  in.flags = {flag("registry", "postgres")};
  std::string m = load_error(in);
  EXPECT_EQ(m.rfind("postgres_url:", 0), 0u) << m;
  EXPECT_HAS(m, "registry from flag --registry");

  in.env = {{"FLURRY_POSTGRES_URL", "postgresql://flurry:s3cret-pw@db:notaport/ids"}};
  m = load_error(in);
  EXPECT_EQ(m.rfind("postgres_url:", 0), 0u) << m;
  EXPECT_HAS(m, "notaport");
  EXPECT_HAS(m, "postgres_url from environment variable FLURRY_POSTGRES_URL");
  EXPECT_EQ(m.find("s3cret"), std::string::npos) << m;  // never the password
  in.env[0].second = "db.example:5432";
  EXPECT_HAS(load_error(in), "postgresql://");

  in.env[0].second = "postgres://flurry:s3cret-pw@db:5432/ids?sslmode=require";
  EXPECT_EQ(load_ok(in).service.registry.postgres_url, in.env[0].second);

  // A URL without the postgres registry is a mistake, not ignored.
  ConfigInputs sqlite;
  sqlite.file = write_file("postgres_url = \"postgresql://db/ids\"\n");
  m = load_error(sqlite);
  EXPECT_EQ(m.rfind("postgres_url:", 0), 0u) << m;
  EXPECT_HAS(m, "sqlite");
  EXPECT_HAS(m, "postgres_url from " + *sqlite.file + ":1");
  sqlite.file = write_file("postgres_url = \"\"\n", "empty.toml");
  EXPECT_HAS(load_error(sqlite), "empty");
}

TEST_F(ConfigTest, FileNamedByFlurryConfigUnlessTheFlagIsGiven) {
  const std::string a = write_file("max_batch = 11\n", "a.toml");
  const std::string b = write_file("max_batch = 22\n", "b.toml");
  ConfigInputs in;
  in.env = {{"FLURRY_CONFIG", a}};
  EXPECT_EQ(load_ok(in).service.max_batch, 11u);
  in.file = b;
  EXPECT_EQ(load_ok(in).service.max_batch, 22u);

  ConfigInputs empty;
  empty.env = {{"FLURRY_CONFIG", ""}};
  EXPECT_HAS(load_error(empty), "FLURRY_CONFIG");
}

TEST_F(ConfigTest, MissingFileIsAnError) {
  ConfigInputs in;
  in.file = (dir_.path() / "nope.toml").string();
  const std::string m = load_error(in);
  EXPECT_HAS(m, "nope.toml");
  EXPECT_HAS(m, "cannot read");
}

TEST_F(ConfigTest, UnknownTomlKeyNamesKeyAndLine) {
  ConfigInputs in;
  in.file = write_file("max_batch = 5\nlease_ttl = 5000\n");
  std::string m = load_error(in);
  EXPECT_HAS(m, "lease_ttl");
  EXPECT_HAS(m, *in.file + ":2");
  EXPECT_HAS(m, "lease_ttl_ms");  // the list of known keys

  // A near miss gets a hint instead of the list.
  in.file = write_file("lease_tll_ms = 5000\n", "typo.toml");
  m = load_error(in);
  EXPECT_HAS(m, "lease_tll_ms");
  EXPECT_HAS(m, *in.file + ":1");
  EXPECT_HAS(m, "did you mean \"lease_ttl_ms\"");

  in.file = write_file("[server]\nlisten = \"127.0.0.1:1\"\n", "table.toml");
  m = load_error(in);
  EXPECT_HAS(m, "server");
  EXPECT_HAS(m, *in.file + ":");
}

// libpq's default sslmode=prefer can be stripped by a man in the middle: a PostgreSQL registry or
// segment store on a remote host with no sslmode (nor PGSSLMODE) is a start warning, naming which
// and recommending verify-full, without the password.
TEST_F(ConfigTest, PostgresWithoutSslmodeToARemoteHostIsAStartWarning) {
  const char* saved = std::getenv("PGSSLMODE");
  const std::string saved_mode = saved != nullptr ? saved : "";
  ::unsetenv("PGSSLMODE");
  ConfigInputs in;
  in.env = {{"FLURRY_REGISTRY", "postgres"},
            {"FLURRY_POSTGRES_URL", "postgresql://flurry:s3cret-pw@db.example/ids"}};
  in.flags = {flag("segment_stores", "sqlite, host=db2.example dbname=ids")};
  Result<LoadedConfig> r = load_config(in);
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  ASSERT_EQ(r->warnings.size(), 2u);
  EXPECT_HAS(r->warnings[0], "postgres_url postgresql://flurry:***@db.example/ids: no sslmode");
  EXPECT_HAS(r->warnings[0], "sslmode=verify-full");
  EXPECT_EQ(r->warnings[0].find("s3cret"), std::string::npos) << r->warnings[0];
  EXPECT_HAS(r->warnings[1], "segment store host=db2.example dbname=ids: no sslmode");

  in.env[1].second = "postgresql://flurry@db.example/ids?sslmode=verify-full";
  in.flags = {flag("segment_stores", "sqlite, host=127.0.0.1 dbname=ids")};
  r = load_config(in);
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_TRUE(r->warnings.empty()) << r->warnings[0];

  in.env[1].second = "postgresql://flurry@db.example/ids";
  ::setenv("PGSSLMODE", "verify-full", 1);
  r = load_config(in);
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_TRUE(r->warnings.empty()) << r->warnings[0];
  if (saved_mode.empty()) {
    ::unsetenv("PGSSLMODE");
  } else {
    ::setenv("PGSSLMODE", saved_mode.c_str(), 1);
  }
}

// A deployment's environment often carries unrelated FLURRY_* variables (a script's
// FLURRY_BIN): they are warnings that name the closest setting, and the load goes on.
TEST_F(ConfigTest, UnknownEnvironmentVariableIsAWarning) {
  ConfigInputs in;
  in.env = {{"FLURRY_LEASE_TTL", "5000"},
            {"FLURRY_BIN", "/usr/bin/flurry"},
            {"FLURRY_MAX_BATCH", "7"},
            {"FLURRY_MODULE_DIR", "/opt/flurry/lib"}};  // where modules are found
  Result<LoadedConfig> r = load_config(in);
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ(r->config.service.max_batch, 7u);                      // known ones still apply
  EXPECT_EQ(r->config.service.registry.lease_ttl.count(), 10000);  // the typo does not
  // FLURRY_MODULE_DIR is no unknown variable; only for root is it worth a warning (issue 32).
  if (::geteuid() == 0) {
    ASSERT_EQ(r->warnings.size(), 3u);
    EXPECT_HAS(r->warnings[2], "FLURRY_MODULE_DIR is set for a process running as root");
    EXPECT_HAS(r->warnings[2], "\"/opt/flurry/lib\"");
  } else {
    ASSERT_EQ(r->warnings.size(), 2u);
  }
  EXPECT_HAS(r->warnings[0], "\"FLURRY_LEASE_TTL\"");
  EXPECT_HAS(r->warnings[0], "closest is FLURRY_LEASE_TTL_MS");
  EXPECT_HAS(r->warnings[1], "\"FLURRY_BIN\"");
  EXPECT_HAS(r->warnings[1], "ignored");

  // A file key or a flag that is not a setting stays an error.
  in.flags = {{"no_such_key", "--no-such-key", "1"}};
  EXPECT_HAS(load_error(in), "no_such_key");
}

TEST_F(ConfigTest, BadValuesNameKeyAndSource) {
  struct Case {
    std::vector<std::pair<std::string, std::string>> env;
    std::vector<FlagValue> flags;
    std::string key;
    std::string source;
    std::string why;
  };
  const std::vector<Case> cases = {
      {{{"FLURRY_MAX_BATCH", "abc"}},
       {},
       "max_batch",
       "environment variable FLURRY_MAX_BATCH",
       "not a whole number"},
      {{{"FLURRY_LEASE_TTL_MS", "-1"}},
       {},
       "lease_ttl_ms",
       "environment variable FLURRY_LEASE_TTL_MS",
       "not a whole number"},
      {{{"FLURRY_LEASE_TTL_MS", ""}},
       {},
       "lease_ttl_ms",
       "environment variable FLURRY_LEASE_TTL_MS",
       "empty"},
      {{},
       {flag("lease_ttl_ms", "12.5")},
       "lease_ttl_ms",
       "flag --lease-ttl-ms",
       "not a whole number"},
      {{},
       {flag("max_batch", "99999999999999999999999")},
       "max_batch",
       "flag --max-batch",
       "too large"},
      {{}, {flag("lease_ttl_ms", "499")}, "lease_ttl_ms", "flag --lease-ttl-ms", "out of range"},
      {{}, {flag("io_threads", "0")}, "io_threads", "flag --io-threads", "out of range"},
      {{}, {flag("io_threads", "257")}, "io_threads", "flag --io-threads", "out of range"},
      {{}, {flag("max_lead_ms", "86400001")}, "max_lead_ms", "flag --max-lead-ms", "out of range"},
      {{}, {flag("max_batch", "0")}, "max_batch", "flag --max-batch", "out of range"},
      {{},
       {flag("max_batch", "1000001")},
       "max_batch",
       "flag --max-batch",
       "1000001 is more than 1000000, the most IDs one request may ask for"},
      {{},
       {flag("response_budget", "1048575")},
       "response_budget",
       "flag --response-budget",
       "out of range"},
      {{{"FLURRY_LAYOUT", "time:99@1ms,nonsense"}},
       {},
       "layout",
       "environment variable FLURRY_LAYOUT",
       ""},
      {{}, {flag("layout", "no-such-preset")}, "layout", "flag --layout", ""},
      {{{"FLURRY_ROLLBACK", "sometimes"}},
       {},
       "rollback",
       "environment variable FLURRY_ROLLBACK",
       "is not one of"},
      {{}, {flag("rollback", "WAIT")}, "rollback", "flag --rollback", "is not one of"},
      {{}, {flag("registry", "zookeeper")}, "registry", "flag --registry", "is not one of"},
      {{},
       {flag("etcd_endpoints", "localhost")},
       "etcd_endpoints",
       "flag --etcd-endpoints",
       "is not HOST:PORT"},
      {{{"FLURRY_ETCD_ENDPOINTS", "10.0.0.1:2379,,10.0.0.2:2379"}},
       {},
       "etcd_endpoints",
       "environment variable FLURRY_ETCD_ENDPOINTS",
       "empty endpoint"},
      {{},
       {flag("etcd_endpoints", "10.0.0.1:0")},
       "etcd_endpoints",
       "flag --etcd-endpoints",
       "port"},
      {{}, {flag("cluster", "")}, "cluster", "flag --cluster", "empty"},
      {{}, {flag("log_level", "verbose")}, "log_level", "flag --log-level", "is not one of"},
      {{}, {flag("data_dir", "")}, "data_dir", "flag --data-dir", "empty"},
      {{{"FLURRY_NODE_FROM_HOSTNAME", "yes"}},
       {},
       "node_from_hostname",
       "environment variable FLURRY_NODE_FROM_HOSTNAME",
       "not true or false"},
      {{}, {flag("listen", "localhost")}, "listen", "flag --listen", "not host:port"},
      {{{"FLURRY_LISTEN", "1.2.3.4:99999"}},
       {},
       "listen",
       "environment variable FLURRY_LISTEN",
       "65535"},
      {{}, {flag("listen", "[::1")}, "listen", "flag --listen", "not host:port"},
      {{}, {flag("listen", "::1:7609")}, "listen", "flag --listen", "brackets"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.key + " from " + c.source);
    ConfigInputs in;
    in.env = c.env;
    in.flags = c.flags;
    const std::string m = load_error(in);
    EXPECT_EQ(m.rfind(c.key + ":", 0), 0u) << m;
    EXPECT_HAS(m, "(" + c.source + ")");
    EXPECT_HAS(m, c.why);
  }
}

TEST_F(ConfigTest, BadFileValuesNameKeyAndLine) {
  struct Case {
    std::string line;
    std::string key;
    std::string why;
  };
  const std::vector<Case> cases = {
      {"lease_ttl_ms = -5", "lease_ttl_ms", "-5 must not be negative"},
      {"lease_ttl_ms = \"5000\"", "lease_ttl_ms", "expected an integer, got a string"},
      {"max_batch = 1.5", "max_batch", "got a floating-point number"},
      {"max_batch = 0", "max_batch", "out of range"},
      {"node_from_hostname = 1", "node_from_hostname", "expected true or false, got an integer"},
      {"listen = 7609", "listen", "expected a string, got an integer"},
      {"listen = \"localhost\"", "listen", "not host:port"},
      {"listen = \"1.2.3.4:99999\"", "listen", "65535"},
      {"listen = \"[::1\"", "listen", "not host:port"},
      {"layout = \"bogus\"", "layout", ""},
      {"rollback = \"never\"", "rollback", "is not one of"},
      {"registry = [\"sqlite\"]", "registry", "got an array"},
  };
  int n = 0;
  for (const Case& c : cases) {
    SCOPED_TRACE(c.line);
    ConfigInputs in;
    in.file = write_file("# comment\nmax_wait_ms = 100\n" + c.line + "\n",
                         "bad" + std::to_string(n++) + ".toml");
    const std::string m = load_error(in);
    EXPECT_EQ(m.rfind(c.key + ":", 0), 0u) << m;
    EXPECT_HAS(m, "(" + *in.file + ":3)");
    EXPECT_HAS(m, c.why);
  }
}

TEST_F(ConfigTest, TomlSyntaxErrorNamesFileAndLine) {
  ConfigInputs in;
  in.file = write_file("max_batch = 5\nlease_ttl_ms = = 3\n");
  const std::string m = load_error(in);
  EXPECT_HAS(m, *in.file + ":2:");

  in.file = write_file("listen = \"unterminated\n", "b.toml");
  EXPECT_HAS(load_error(in), *in.file + ":1:");
}

TEST_F(ConfigTest, StaticRegistryNeedsANode) {
  ConfigInputs in;
  in.flags = {flag("registry", "static")};
  std::string m = load_error(in);
  EXPECT_EQ(m.rfind("registry:", 0), 0u) << m;
  EXPECT_HAS(m, "node");
  EXPECT_HAS(m, "registry from flag --registry");

  in.flags.push_back(flag("node", "5"));
  EXPECT_EQ(load_ok(in).service.registry.node, 5u);

  // Node IDs of the default layout are 0-1023.
  in.flags.back() = flag("node", "1024");
  m = load_error(in);
  EXPECT_EQ(m.rfind("node:", 0), 0u) << m;
  EXPECT_HAS(m, "0-1023");
  in.flags.back() = flag("node", "1023");
  EXPECT_EQ(load_ok(in).service.registry.node, 1023u);

  // node and node_from_hostname exclude each other.
  in.flags.push_back(flag("node_from_hostname", "true"));
  EXPECT_HAS(load_error(in), "node_from_hostname");

  // A node with the sqlite registry is an error too.
  ConfigInputs sqlite;
  sqlite.env = {{"FLURRY_NODE", "3"}};
  m = load_error(sqlite);
  EXPECT_EQ(m.rfind("node:", 0), 0u) << m;
  EXPECT_HAS(m, "node from environment variable FLURRY_NODE");
  sqlite.env = {{"FLURRY_NODE_FROM_HOSTNAME", "true"}};
  EXPECT_HAS(load_error(sqlite), "node_from_hostname");
}

TEST_F(ConfigTest, EtcdRegistryNeedsEndpointsAndALongEnoughTtl) {
  ConfigInputs in;
  in.flags = {flag("registry", "etcd")};
  std::string m = load_error(in);
  EXPECT_EQ(m.rfind("etcd_endpoints:", 0), 0u) << m;
  EXPECT_HAS(m, "registry from flag --registry");

  // A TOML string with commas (and spaces after them), as from the flag or the environment.
  in.file = write_file("etcd_endpoints = \"127.0.0.1:2379, [::1]:2380,etcd-2.svc:2379\"\n");
  Config c = load_ok(in);
  EXPECT_EQ(c.service.registry.kind, RegistryKind::kEtcd);
  EXPECT_EQ(c.service.registry.etcd_endpoints,
            (std::vector<EtcdEndpoint>{{"127.0.0.1", 2379}, {"::1", 2380}, {"etcd-2.svc", 2379}}));
  EXPECT_EQ(c.service.registry.cluster, "default");
  in.env = {{"FLURRY_CLUSTER", "prod-eu.1"}};
  EXPECT_EQ(load_ok(in).service.registry.cluster, "prod-eu.1");

  // etcd's leases have whole seconds, two at least.
  in.flags.push_back(flag("lease_ttl_ms", "1999"));
  m = load_error(in);
  EXPECT_EQ(m.rfind("lease_ttl:", 0), 0u) << m;
  EXPECT_HAS(m, "at least 2000 ms");
  EXPECT_HAS(m, "lease_ttl_ms from flag --lease-ttl-ms");
  in.flags.back() = flag("lease_ttl_ms", "2000");
  EXPECT_EQ(load_ok(in).service.registry.lease_ttl.count(), 2000);

  // The cluster name becomes part of etcd keys.
  in.flags.push_back(flag("cluster", "a/b"));
  m = load_error(in);
  EXPECT_EQ(m.rfind("cluster:", 0), 0u) << m;
  EXPECT_HAS(m, "cluster from flag --cluster");
  in.flags.back() = flag("cluster", std::string(65, 'x'));
  EXPECT_HAS(load_error(in), "1 to 64 characters");

  // Endpoints with another registry are an error, not ignored.
  ConfigInputs sqlite;
  sqlite.env = {{"FLURRY_ETCD_ENDPOINTS", "127.0.0.1:2379"}};
  m = load_error(sqlite);
  EXPECT_EQ(m.rfind("etcd_endpoints:", 0), 0u) << m;
  EXPECT_HAS(m, "sqlite");
  EXPECT_HAS(m, "etcd_endpoints from environment variable FLURRY_ETCD_ENDPOINTS");
}

TEST_F(ConfigTest, HorizonWindowMustExceedMaxLead) {
  ConfigInputs in;
  in.file = write_file("max_lead_ms = 1000\n");
  in.flags = {flag("horizon_window_ms", "1000")};
  std::string m = load_error(in);
  EXPECT_HAS(m, "horizon_window (1000 ms) must exceed max_lead (1000 ms)");
  EXPECT_HAS(m, "max_lead_ms from " + *in.file + ":1");
  EXPECT_HAS(m, "horizon_window_ms from flag --horizon-window-ms");

  in.flags = {flag("horizon_window_ms", "1001")};
  EXPECT_EQ(load_ok(in).service.horizon_window.count(), 1001);

  // The default window (2000) against a larger lead from the environment.
  ConfigInputs env;
  env.env = {{"FLURRY_MAX_LEAD_MS", "5000"}};
  m = load_error(env);
  EXPECT_HAS(m, "horizon_window (2000 ms)");
  EXPECT_HAS(m, "max_lead_ms from environment variable FLURRY_MAX_LEAD_MS");

  // Compared in units of the layout, as the generator compares them: with a one-second unit,
  // 1500 ms does not exceed 1000 ms.
  ConfigInputs coarse;
  coarse.flags = {flag("layout", "time:31@1s,node:10,seq:22;epoch=2025-01-01Z"),
                  flag("horizon_window_ms", "1500")};
  m = load_error(coarse);
  EXPECT_HAS(m, "time unit");
  EXPECT_HAS(m, "layout from flag --layout");
  coarse.flags.back() = flag("horizon_window_ms", "2000");
  EXPECT_EQ(load_ok(coarse).service.horizon_window.count(), 2000);
}

TEST_F(ConfigTest, RollbackClockNeedsAClockField) {
  ConfigInputs in;
  in.flags = {flag("rollback", "clock")};
  const std::string m = load_error(in);
  EXPECT_HAS(m, "rollback policy \"clock\" needs a layout with a clock field");
  EXPECT_HAS(m, "rollback from flag --rollback");

  in.env = {{"FLURRY_LAYOUT", "multiclock"}};
  EXPECT_EQ(std::string(to_string(load_ok(in).service.rollback)), "clock");
}

// Options built in code are checked by Service::create with the same rules.
TEST_F(ConfigTest, ServiceOptionsBuiltInCodeAreChecked) {
  service::ServiceOptions o;
  EXPECT_TRUE(service::check_service_options(o).ok());
  o.registry.kind = RegistryKind::kStatic;
  Status st = service::check_service_options(o);
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_HAS(st.message(), "node");
  o.registry.node = 1;
  EXPECT_TRUE(check_service_options(o).ok());
  o.registry.node = 1024;  // the default layout's node IDs are 0-1023
  EXPECT_HAS(check_service_options(o).message(), "0-1023");
  o.registry.node = 1;
  o.max_lead = std::chrono::milliseconds(5000);
  EXPECT_HAS(check_service_options(o).message(), "horizon_window");
  o.max_lead = std::chrono::milliseconds(1000);
  o.rollback = RollbackPolicy::kClock;
  EXPECT_HAS(check_service_options(o).message(), "clock field");
  EXPECT_FALSE(service::Service::create(o).ok());
}

TEST_F(ConfigTest, ToTomlLoadsBackToTheSameConfig) {
  Config defaults;
  ConfigInputs in;
  in.file = write_file(to_toml(defaults), "defaults.toml");
  expect_same(load_ok(in), defaults);

  Config c;
  c.http.listen = {"::1", 0};
  c.service.registry.data_dir = "/tmp/odd \"dir\"\\with\ttab and \x01 control";
  c.service.registry.kind = RegistryKind::kStatic;
  c.service.registry.node = 9;
  c.service.layout = Layout::parse("time:41@1ms,clock:4,worker:8,seq:10;epoch=2025-01-01Z").value();
  c.service.registry.lease_ttl = std::chrono::milliseconds(500);
  c.service.rollback = RollbackPolicy::kClock;
  c.service.max_lead = std::chrono::milliseconds(0);
  c.service.max_wait = std::chrono::milliseconds(86400000);
  c.service.horizon_window = std::chrono::milliseconds(1);
  c.http.io_threads = 256;
  c.service.max_batch = 1000000;
  c.http.response_budget = std::uint64_t{1} << 20;
  c.http.max_connections = 1;
  c.http.idle_timeout = std::chrono::milliseconds(100);
  c.http.header_limit = 512;
  c.http.body_limit = 0;
  c.log_level = LogLevel::kOff;
  ASSERT_TRUE(check_service_options(c.service).ok())
      << check_service_options(c.service).to_string();
  in.file = write_file(to_toml(c), "custom.toml");
  expect_same(load_ok(in), c);

  Config e;
  e.service.registry.kind = RegistryKind::kEtcd;
  e.service.registry.etcd_endpoints = {{"10.0.0.1", 2379}, {"fd00::2", 2379}, {"etcd.example", 1}};
  e.service.registry.cluster = "prod_2.eu-west";
  e.service.registry.lease_ttl = std::chrono::milliseconds(2000);
  ASSERT_TRUE(check_service_options(e.service).ok())
      << check_service_options(e.service).to_string();
  in.file = write_file(to_toml(e), "etcd.toml");
  const Config e_back = load_ok(in);
  expect_same(e_back, e);
  EXPECT_EQ(e_back.service.registry.etcd_endpoints, e.service.registry.etcd_endpoints);

  Config h;
  h.service.registry.kind = RegistryKind::kStatic;
  h.service.registry.node_from_hostname = true;
  h.service.registry.data_dir = "/data/caf\xc3\xa9";
  in.file = write_file(to_toml(h), "hostname.toml");
  expect_same(load_ok(in), h);

  Config p;
  p.service.registry.kind = RegistryKind::kPostgres;
  // Quoting round-trips; a password would not (--print-config masks it, see
  // PrintedConfigurationMasksEverySecret).
  p.service.registry.postgres_url = "host=db.example dbname='my ids' user='a \\' b'";
  in.file = write_file(to_toml(p), "postgres.toml");
  const Config back = load_ok(in);
  expect_same(back, p);
  EXPECT_EQ(back.service.registry.postgres_url, p.service.registry.postgres_url);
}

// A setting that to_toml could not write back (TOML is UTF-8) is refused when loaded.
TEST_F(ConfigTest, NonUtf8SettingsAreRefused) {
  for (const char* bad_path : {"/data/\xff", "/data/\xc3", "/data/\xe0\x80\x80", "/\xed\xa0\x80"}) {
    ConfigInputs env;
    env.env = {{"FLURRY_DATA_DIR", bad_path}};
    const Result<LoadedConfig> r = load_config(env);
    ASSERT_FALSE(r.ok()) << bad_path;
    EXPECT_NE(r.status().message().find("data_dir"), std::string::npos) << r.status().message();
    EXPECT_NE(r.status().message().find("UTF-8"), std::string::npos) << r.status().message();
    EXPECT_NE(r.status().message().find("FLURRY_DATA_DIR"), std::string::npos)
        << r.status().message();
  }
  ConfigInputs ok;
  ok.env = {{"FLURRY_DATA_DIR", "/data/\xc3\xa9t\xc3\xa9"}};  // "été": valid UTF-8 is fine
  const Config c = load_ok(ok);
  ConfigInputs in;
  in.file = write_file(to_toml(c), "utf8.toml");
  expect_same(load_ok(in), c);
}

TEST_F(ConfigTest, SegmentSettingsDefaultsAndTypedValues) {
  ConfigInputs in;
  in.flags = {flag("data_dir", "/srv/ids")};
  Config c = load_ok(in);
  EXPECT_EQ(c.segments.stores_text, "sqlite");
  ASSERT_EQ(c.segments.stores.size(), 1u);
  EXPECT_EQ(c.segments.stores[0].kind, SegmentStoreSpec::Kind::kSqlite);
  EXPECT_EQ(c.segments.stores[0].sqlite_path, std::filesystem::path("/srv/ids/segments.db"));
  EXPECT_DOUBLE_EQ(c.segments.options.prefetch_at, 0.1);
  EXPECT_EQ(c.segments.options.target_duration.count(), 900000);
  EXPECT_EQ(c.segments.options.max_step, 1000000u);
  EXPECT_EQ(c.segments.options.max_wait.count(), 1000);
  EXPECT_EQ(c.segments.options.max_batch, c.service.max_batch);
  EXPECT_FALSE(c.segments.admin_token_file.has_value());
  EXPECT_HAS(to_toml(c), "# admin_token_file = (not set)");

  // "sqlite" lives in data_dir whatever order the sources give them in.
  in.file = write_file("segment_stores = \"sqlite,sqlite:/other/s.db\"\n");
  in.env = {{"FLURRY_SEGMENT_PREFETCH_PERCENT", "25"}, {"FLURRY_ADMIN_TOKEN_FILE", "/etc/tok"}};
  in.flags = {flag("segment_max_wait_ms", "0"), flag("segment_max_step", "5000"),
              flag("segment_target_duration_ms", "60000"), flag("data_dir", "/late")};
  c = load_ok(in);
  ASSERT_EQ(c.segments.stores.size(), 2u);
  EXPECT_EQ(c.segments.stores[0].sqlite_path, std::filesystem::path("/late/segments.db"));
  EXPECT_EQ(c.segments.stores[1].sqlite_path, std::filesystem::path("/other/s.db"));
  EXPECT_DOUBLE_EQ(c.segments.options.prefetch_at, 0.25);
  EXPECT_EQ(c.segments.options.max_wait.count(), 0);
  EXPECT_EQ(c.segments.options.max_step, 5000u);
  EXPECT_EQ(c.segments.options.target_duration.count(), 60000);
  ASSERT_TRUE(c.segments.admin_token_file.has_value());
  EXPECT_EQ(*c.segments.admin_token_file, std::filesystem::path("/etc/tok"));

  // --print-config writes them back, and they load to the same values (the path, never a token).
  ConfigInputs again;
  again.file = write_file(to_toml(c), "back.toml");
  const Config back = load_ok(again);
  expect_same(back, c);
  EXPECT_EQ(back.segments.stores.size(), 2u);
  EXPECT_HAS(to_toml(c), "admin_token_file = '/etc/tok'");
}

// etcd over TLS with a user: https:// endpoints, the TLS files and the password FILE (from the
// environment too) load, print back as paths, and are refused where they do not apply.
TEST_F(ConfigTest, EtcdTlsAndAuthenticationSettings) {
  ConfigInputs in;
  in.env = {{"FLURRY_ETCD_PASSWORD_FILE", "/etc/flurry/etcd-password"}};
  in.flags = {flag("registry", "etcd"),
              flag("etcd_endpoints", "https://10.0.0.1:2379,https://[fd00::2]:2379"),
              flag("etcd_ca_file", "/etc/flurry/ca.pem"),
              flag("etcd_cert_file", "/etc/flurry/client.pem"),
              flag("etcd_key_file", "/etc/flurry/client.key"),
              flag("etcd_user", "flurry")};
  const Config c = load_ok(in);
  const RegistryOptions& r = c.service.registry;
  ASSERT_EQ(r.etcd_endpoints.size(), 2u);
  EXPECT_TRUE(r.etcd_endpoints[0].tls);
  EXPECT_EQ(r.etcd_endpoints[1].to_string(), "https://[fd00::2]:2379");
  EXPECT_EQ(r.etcd_user, "flurry");
  EXPECT_EQ(r.etcd_password_file, std::filesystem::path("/etc/flurry/etcd-password"));
  EXPECT_EQ(r.etcd_tls.key_file, std::filesystem::path("/etc/flurry/client.key"));
  const std::string toml = to_toml(c);
  EXPECT_HAS(toml, "etcd_endpoints = 'https://10.0.0.1:2379,https://[fd00::2]:2379'");
  EXPECT_HAS(toml, "etcd_password_file = '/etc/flurry/etcd-password'");
  EXPECT_HAS(toml, "etcd_user = 'flurry'");
  ConfigInputs again;
  again.file = write_file(toml, "etcd-back.toml");
  expect_same(load_ok(again), c);

  // TLS files with plain endpoints, mixed schemes, a user without a password file.
  in.flags[1] = flag("etcd_endpoints", "10.0.0.1:2379");
  std::string m = load_error(in);
  EXPECT_HAS(m, "etcd_ca_file");
  EXPECT_HAS(m, "plain HTTP");
  in.flags[1] = flag("etcd_endpoints", "https://10.0.0.1:2379,10.0.0.2:2379");
  m = load_error(in);
  EXPECT_HAS(m, "etcd_endpoints");
  EXPECT_HAS(m, "mixed");
  ConfigInputs user_only;
  user_only.flags = {flag("registry", "etcd"), flag("etcd_endpoints", "10.0.0.1:2379"),
                     flag("etcd_user", "flurry")};
  m = load_error(user_only);
  EXPECT_HAS(m, "etcd_password_file");
  EXPECT_HAS(m, "etcd_user from flag --etcd-user");
}

TEST_F(ConfigTest, BadSegmentSettingsNameKeyAndSource) {
  struct Case {
    std::vector<std::pair<std::string, std::string>> env;
    std::vector<FlagValue> flags;
    std::vector<std::string> needles;
  };
  const std::vector<Case> cases = {
      {{{"FLURRY_SEGMENT_STORES", "mysql://x"}},
       {},
       {"segment_stores", "environment variable FLURRY_SEGMENT_STORES"}},
      {{}, {flag("segment_stores", "sqlite,sqlite")}, {"segment_stores", "flag --segment-stores"}},
      // The same file only once "sqlite" is placed in data_dir, which comes later: the list
      // parsed by its setting is checked again there, not parsed again.
      {{},
       {flag("segment_stores", "sqlite,sqlite:/late/segments.db"), flag("data_dir", "/late")},
       {"segment_stores", "entries 1 and 2 are the same store", "flag --segment-stores"}},
      {{}, {flag("segment_stores", "")}, {"segment_stores", "is empty"}},
      {{}, {flag("segment_prefetch_percent", "0")}, {"segment_prefetch_percent", "1 to 99"}},
      {{}, {flag("segment_prefetch_percent", "100")}, {"segment_prefetch_percent", "1 to 99"}},
      {{}, {flag("segment_prefetch_percent", "ten")}, {"segment_prefetch_percent", "whole number"}},
      {{}, {flag("segment_max_step", "0")}, {"segment_max_step", "out of range"}},
      {{}, {flag("segment_target_duration_ms", "0")}, {"segment_target_duration_ms", "range"}},
      {{}, {flag("segment_max_wait_ms", "600001")}, {"segment_max_wait_ms", "out of range"}},
      {{{"FLURRY_ADMIN_TOKEN_FILE", ""}}, {}, {"admin_token_file", "is empty"}},
  };
  for (const Case& c : cases) {
    ConfigInputs in;
    in.env = c.env;
    in.flags = c.flags;
    const std::string message = load_error(in);
    for (const std::string& needle : c.needles) EXPECT_HAS(message, needle);
  }
  // In a file: the file and line.
  ConfigInputs in;
  in.file = write_file("log_level = \"info\"\nsegment_max_step = \"big\"\n");
  const std::string message = load_error(in);
  EXPECT_HAS(message, "segment_max_step");
  EXPECT_HAS(message, ":2");
}

TEST_F(ConfigTest, AdminTokenIsReadTrimmedAndNeverQuoted) {
  const std::string good = token_file("  \n s3cret-Token_1-0123456789abcdef0123 \t\n", "token");
  Result<std::string> token = ops::read_admin_token(good);
  ASSERT_TRUE(token.ok()) << token.status().to_string();
  EXPECT_EQ(*token, "s3cret-Token_1-0123456789abcdef0123");

  const std::string missing = (dir_.path() / "no-such-token").string();
  Result<std::string> r = ops::read_admin_token(missing);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  EXPECT_HAS(r.status().message(), "admin_token_file");
  EXPECT_HAS(r.status().message(), "no-such-token");

  r = ops::read_admin_token(token_file(" \n\t ", "blank"));
  ASSERT_FALSE(r.ok());
  EXPECT_HAS(r.status().message(), "is empty");
  EXPECT_HAS(r.status().message(), "blank");

  // A token that cannot go into a header is refused without being quoted.
  r = ops::read_admin_token(token_file("two words-secret-0123456789abcdef0123", "spaced"));
  ASSERT_FALSE(r.ok());
  EXPECT_HAS(r.status().message(), "spaced");
  EXPECT_EQ(r.status().message().find("words-secret"), std::string::npos) << r.status().message();

  r = ops::read_admin_token(token_file(std::string(5000, 'a'), "huge"));
  ASSERT_FALSE(r.ok());
  EXPECT_HAS(r.status().message(), "larger than");

  r = ops::read_admin_token(dir_.path());  // a directory
  ASSERT_FALSE(r.ok());
  EXPECT_HAS(r.status().message(), "admin_token_file");
}

TEST_F(ConfigTest, AdminTokenMustBeLongAndPrivate) {
  // 31 characters: too short, whatever the file's mode.
  Result<std::string> r = ops::read_admin_token(token_file(std::string(31, 'k') + "\n", "short"));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  EXPECT_HAS(r.status().message(), "31 characters");
  EXPECT_HAS(r.status().message(), "at least 32");
  EXPECT_EQ(r.status().message().find("kkkk"), std::string::npos) << r.status().message();
  r = ops::read_admin_token(token_file("a", "one-letter"));
  ASSERT_FALSE(r.ok());
  EXPECT_HAS(r.status().message(), "at least 32");
  ASSERT_TRUE(ops::read_admin_token(token_file("k7Qm2xR9vL4pZ8nW3cT6yB1hF5jD0sGa", "exact")).ok());
  // 32 characters, but one letter: refused for its variety, not its length.
  r = ops::read_admin_token(token_file(std::string(32, 'k'), "one-letter-32"));
  ASSERT_FALSE(r.ok());
  EXPECT_HAS(r.status().message(), "one-letter-32");
  EXPECT_HAS(r.status().message(), "only 1 different character");
  EXPECT_EQ(r.status().message().find("kkkk"), std::string::npos) << r.status().message();

  // Readable or writable by group or others: refused, naming the mode and the fix.
  const std::string token = "0123456789abcdef0123456789abcdef";
  for (const auto mode : {0644, 0640, 0604, 0620, 0666, 0600 | 0010}) {
    const std::string path = token_file(token, "open-" + std::to_string(mode));
    ASSERT_EQ(::chmod(path.c_str(), static_cast<mode_t>(mode)), 0);
    r = ops::read_admin_token(path);
    ASSERT_FALSE(r.ok()) << std::oct << mode;
    char octal[8];
    std::snprintf(octal, sizeof octal, "%04o", static_cast<unsigned>(mode));
    EXPECT_HAS(r.status().message(), std::string("mode ") + octal);
    EXPECT_HAS(r.status().message(), "chmod 600");
    EXPECT_HAS(r.status().message(), path);
    EXPECT_EQ(r.status().message().find(token), std::string::npos) << r.status().message();
  }
  const std::string owner_only = token_file(token, "owner-only");
  ASSERT_EQ(::chmod(owner_only.c_str(), 0400), 0);
  r = ops::read_admin_token(owner_only);
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ(*r, token);
}

TEST(ParseListenTest, GoodAddresses) {
  struct Case {
    std::string_view text;
    std::string_view host;
    std::uint16_t port;
  };
  for (const Case& c :
       {Case{"127.0.0.1:7609", "127.0.0.1", 7609}, Case{"0.0.0.0:0", "0.0.0.0", 0},
        Case{"[::1]:8080", "::1", 8080}, Case{"[::]:65535", "::", 65535},
        Case{"example.com:80", "example.com", 80}, Case{"localhost:00080", "localhost", 80}}) {
    SCOPED_TRACE(c.text);
    Result<http::ListenAddress> r = http::parse_listen(c.text);
    ASSERT_TRUE(r.ok()) << r.status().to_string();
    EXPECT_EQ(r->host, c.host);
    EXPECT_EQ(r->port, c.port);
  }
}

TEST(ParseListenTest, BadAddresses) {
  for (std::string_view text :
       {"", "localhost", "1.2.3.4:99999", "1.2.3.4:65536", "[::1", "[::1]", "[::1]:", "[]:80",
        "::1:80", ":80", "host:", "host:8a", "host:123456", "host:-1", "a b:80", "a/b:80",
        "[::1]x:80", "host:+80"}) {
    SCOPED_TRACE(text);
    Result<http::ListenAddress> r = http::parse_listen(text);
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
    EXPECT_FALSE(r.status().message().empty());
  }
}

// Order numbers: typed values, the alphabet's default check, a check that does not fit the
// alphabet named with both keys and their sources, and keys accepted from the environment only.
TEST_F(ConfigTest, OrderSettings) {
  const Config defaults = load_ok({});
  EXPECT_FALSE(defaults.orders.key_file.has_value());
  EXPECT_EQ(defaults.orders.alphabet, OrderAlphabet::kDigits);
  EXPECT_EQ(defaults.orders.effective_check(), OrderCheck::kDamm);
  EXPECT_EQ(defaults.orders.length, 0u);
  EXPECT_EQ(defaults.orders.prefix, "");
  EXPECT_EQ(defaults.orders.group, 0u);
  EXPECT_EQ(defaults.orders.separator, '-');

  ConfigInputs in;
  in.file = write_file(
      "order_alphabet = \"base32\"\n"
      "order_prefix = \"ord\"\n"
      "order_group = 5\n"
      "order_separator = \" \"\n"
      "order_utc_offset = \"+08:00\"\n"
      "order_key_file = \"/etc/flurry/order-keys\"\n");
  const Config c = load_ok(in);
  EXPECT_EQ(c.orders.alphabet, OrderAlphabet::kBase32);
  EXPECT_EQ(c.orders.effective_check(), OrderCheck::kMod37);
  EXPECT_EQ(c.orders.prefix, "ORD");
  EXPECT_EQ(c.orders.group, 5u);
  EXPECT_EQ(c.orders.separator, ' ');
  EXPECT_EQ(c.orders.utc_offset_minutes, 480);
  EXPECT_EQ(c.orders.key_file->string(), "/etc/flurry/order-keys");
  // --print-config writes them back to the same settings.
  ConfigInputs again;
  again.file = write_file(to_toml(c), "again.toml");
  expect_same(load_ok(again), c);

  ConfigInputs date;
  date.flags = {flag("order_prefix", "date"), flag("order_utc_offset", "-05:30")};
  const Config d = load_ok(date);
  EXPECT_TRUE(d.orders.dated());
  EXPECT_EQ(d.orders.utc_offset_minutes, -330);
}

TEST_F(ConfigTest, BadOrderSettingsNameKeyAndSource) {
  const auto error_of = [&](ConfigInputs in) {
    Result<LoadedConfig> r = load_config(in);
    EXPECT_FALSE(r.ok());
    return r.ok() ? std::string() : r.status().message();
  };
  ConfigInputs in;
  in.env = {{"FLURRY_ORDER_ALPHABET", "hex"}};
  std::string m = error_of(in);
  EXPECT_HAS(m, "order_alphabet");
  EXPECT_HAS(m, "environment variable FLURRY_ORDER_ALPHABET");
  in.env = {{"FLURRY_ORDER_CHECK", "crc"}};
  EXPECT_HAS(error_of(in), "order_check");
  in.env = {{"FLURRY_ORDER_UTC_OFFSET", "+25:00"}};
  EXPECT_HAS(error_of(in), "order_utc_offset");
  in.env = {{"FLURRY_ORDER_PREFIX", "TOOLONGPREFIX"}};
  EXPECT_HAS(error_of(in), "order_prefix");
  in.env = {{"FLURRY_ORDER_SEPARATOR", "+"}};
  EXPECT_HAS(error_of(in), "order_separator");
  in.env.clear();
  in.flags = {flag("order_group", "99")};
  EXPECT_HAS(error_of(in), "flag --order-group");

  // A check that does not fit the alphabet: both keys, both sources.
  ConfigInputs mismatch;
  mismatch.env = {{"FLURRY_ORDER_CHECK", "luhn"}};
  mismatch.flags = {flag("order_alphabet", "base32")};
  m = error_of(mismatch);
  EXPECT_HAS(m, "order_check luhn needs order_alphabet digits");
  EXPECT_HAS(m, "order_check from environment variable FLURRY_ORDER_CHECK");
  EXPECT_HAS(m, "order_alphabet from flag --order-alphabet");
}

// order_segment_prefix: one literal for every tag, or TAG=LITERAL pairs; set, every source needs
// a prefix of its own that no other begins with, or the start is refused naming both.
TEST_F(ConfigTest, OrderSegmentPrefixGivesEachSourceItsOwn) {
  ConfigInputs in;
  in.flags = {flag("order_prefix", "S"), flag("order_segment_prefix", "orders=ord,*=T")};
  const Config c = load_ok(in);
  ASSERT_EQ(c.orders.tag_prefixes.size(), 2u);
  EXPECT_EQ(*c.orders.prefix_of_tag("orders"), "ORD");
  EXPECT_EQ(*c.orders.prefix_of_tag("invoices"), "T");
  EXPECT_HAS(to_toml(c), "order_segment_prefix = 'orders=ORD,*=T'");
  in.file = write_file(to_toml(c), "prefixes.toml");
  in.flags.clear();
  EXPECT_EQ(load_ok(in).orders.tag_prefixes, c.orders.tag_prefixes);

  in.file.reset();
  in.flags = {flag("order_prefix", "date"), flag("order_segment_prefix", "SEG")};
  EXPECT_EQ(*load_ok(in).orders.prefix_of_tag("any"), "SEG");
  // Only the tags listed: another tag has no prefix, and says how to give it one.
  in.flags = {flag("order_prefix", "S"), flag("order_segment_prefix", "orders=T")};
  Result<std::string> none = load_ok(in).orders.prefix_of_tag("invoices");
  ASSERT_FALSE(none.ok());
  EXPECT_HAS(none.status().message(), "invoices=LITERAL");

  const auto refused = [&](std::string prefix, std::string segment, std::string_view needle) {
    SCOPED_TRACE(prefix + " / " + segment);
    ConfigInputs bad;
    if (!prefix.empty()) bad.flags.push_back(flag("order_prefix", prefix));
    bad.flags.push_back(flag("order_segment_prefix", segment));
    EXPECT_HAS(load_error(bad), needle);
  };
  refused("", "orders=T", "needs order_prefix");
  refused("ORD", "orders=OR", "begin alike");
  refused("S", "orders=T,invoices=T", "are the same");
  refused("S", "orders=S", "are the same");
  refused("date", "orders=1A", "begins with a digit");
  refused("S", "orders=T,orders=U", "given twice");
  refused("S", "orders=date", "no date");
  refused("S", "orders=", "literal");
  refused("S", "orders=T,broken", "TAG=LITERAL");
  refused("S", "orders=TOOLONGPREFIX", "literal");
}

TEST_F(ConfigTest, OrderKeysComeFromTheEnvironmentOnly) {
  constexpr std::string_view kKey = "2b7e151628aed2a6abf7158809cf4f3c";
  ConfigInputs in;
  in.env = {{"FLURRY_ORDER_KEYS", "1 = " + std::string(kKey)}};
  Result<LoadedConfig> loaded = load_config(in);
  ASSERT_TRUE(loaded.ok()) << loaded.status().to_string();
  EXPECT_TRUE(loaded->warnings.empty());  // not an unknown FLURRY_* variable
  EXPECT_EQ(to_toml(loaded->config).find(kKey), std::string::npos);
  // Not a setting: neither a key of the file nor a flag.
  ConfigInputs file;
  file.file = write_file("order_keys = \"1 = " + std::string(kKey) + "\"\n", "keys.toml");
  Result<LoadedConfig> refused = load_config(file);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().message().find(kKey), std::string::npos);

  Result<std::optional<OrderKeySet>> keys = order::load_order_keys(std::nullopt, in.env, true);
  ASSERT_TRUE(keys.ok()) << keys.status().to_string();
  ASSERT_TRUE(keys->has_value());
  EXPECT_EQ((*keys)->versions(), "1");
  // No keys anywhere: off.
  Result<std::optional<OrderKeySet>> none = order::load_order_keys(std::nullopt, {}, true);
  ASSERT_TRUE(none.ok());
  EXPECT_FALSE(none->has_value());
  // A key file and the variable together: refused by the service, the file wins on the CLI.
  const std::string path = write_file("1 = 000102030405060708090a0b0c0d0e0f\n", "order-keys");
  Result<std::optional<OrderKeySet>> both = order::load_order_keys(path, in.env, true);
  ASSERT_FALSE(both.ok());
  EXPECT_HAS(both.status().message(), "FLURRY_ORDER_KEYS");
  Result<std::optional<OrderKeySet>> file_wins = order::load_order_keys(path, in.env, false);
  ASSERT_TRUE(file_wins.ok());
  EXPECT_TRUE(file_wins->has_value());
  // A malformed variable: named, its bytes never shown.
  Result<std::optional<OrderKeySet>> bad =
      order::load_order_keys(std::nullopt, {{"FLURRY_ORDER_KEYS", "1 = 2b7e1516zz"}}, true);
  ASSERT_FALSE(bad.ok());
  EXPECT_HAS(bad.status().message(), "environment variable FLURRY_ORDER_KEYS");
  EXPECT_EQ(bad.status().message().find("2b7e1516"), std::string::npos);
}

}  // namespace
}  // namespace flurry::app
