// PostgreSQL connection strings as the registry and the segment stores take them
// (src/db/postgres_conninfo.h):
// which ones are accepted, and that the password never shows, in either form. No server needed.
#include <gtest/gtest.h>

#include <string>

#include "db/postgres_conninfo.h"

namespace flurry::internal {
namespace {

TEST(PostgresUrlTest, AcceptsUrlsAndKeyValuePairs) {
  for (const char* url :
       {"postgresql://flurry@db.example:5432/ids", "postgres://db/ids?sslmode=require",
        "postgresql://u:p%40ss@[::1]:5433,other:5434/ids?target_session_attrs=read-write",
        "postgresql:///ids?host=/run/postgresql", "host=db port=5432 dbname=ids user=flurry",
        "host=db password='a b\\' c' dbname=ids"}) {
    EXPECT_TRUE(check_postgres_url(url).ok()) << url << ": " << check_postgres_url(url).to_string();
  }
}

TEST(PostgresUrlTest, RefusesOtherTextNamingTheProblem) {
  struct Case {
    const char* url;
    const char* says;
  };
  for (const Case& c :
       {Case{"", "empty"}, Case{"db.example:5432", "neither"}, Case{"mysql://db/ids", "neither"},
        Case{"host=db nonsense=1", "nonsense"}, Case{"postgresql://db:notaport/ids", "port"},
        Case{"host=a,b port=5432,0", "port"}, Case{"host='unterminated", "quoted"}}) {
    const Status st = check_postgres_url(c.url);
    EXPECT_EQ(st.code(), StatusCode::kInvalidArgument) << c.url << ": " << st.to_string();
    EXPECT_NE(st.message().find(c.says), std::string::npos) << c.url << ": " << st.message();
  }
}

TEST(PostgresUrlTest, RedactsThePasswordOfAUrl) {
  EXPECT_EQ(redact_postgres_url("postgresql://flurry:s3cret@db:5432/ids"),
            "postgresql://flurry:***@db:5432/ids");
  EXPECT_EQ(redact_postgres_url("postgres://flurry:s3%2Fcret@db/ids?sslmode=require"),
            "postgres://flurry:***@db/ids?sslmode=require");
  EXPECT_EQ(redact_postgres_url("postgresql://db/ids?user=u&password=s3cret&sslmode=require"),
            "postgresql://db/ids?user=u&password=***&sslmode=require");
  EXPECT_EQ(redact_postgres_url("postgresql://u:a@db/ids?pass%77ord=b"),
            "postgresql://u:***@db/ids?pass%77ord=***");
  // Nothing to hide: unchanged. A user name alone is not a secret.
  EXPECT_EQ(redact_postgres_url("postgresql://flurry@db/ids"), "postgresql://flurry@db/ids");
  EXPECT_EQ(redact_postgres_url("postgresql:///ids"), "postgresql:///ids");
  // An empty password is shown as masked too (it is one).
  EXPECT_EQ(redact_postgres_url("postgresql://flurry:@db/ids"), "postgresql://flurry:***@db/ids");
}

TEST(PostgresUrlTest, RedactsThePasswordOfKeyValuePairs) {
  EXPECT_EQ(redact_postgres_url("host=db password=s3cret dbname=ids"),
            "host=db password=*** dbname=ids");
  EXPECT_EQ(redact_postgres_url("host=db password = 'a b\\' c' dbname=ids"),
            "host=db password = '***' dbname=ids");
  EXPECT_EQ(redact_postgres_url("password=x"), "password=***");
  // Only the key "password": a value that happens to say password stays.
  EXPECT_EQ(redact_postgres_url("host=db user=password"), "host=db user=password");
}

TEST(PostgresUrlTest, RedactsTheSslKeyPassphraseToo) {
  EXPECT_EQ(redact_postgres_url("host=db sslpassword=k3y-pass dbname=ids"),
            "host=db sslpassword=*** dbname=ids");
  EXPECT_EQ(redact_postgres_url("postgresql://u:p@db/ids?sslpassword=k%33y&sslmode=require"),
            "postgresql://u:***@db/ids?sslpassword=***&sslmode=require");
  EXPECT_EQ(redact_postgres_url("postgresql://db/ids?ssl%70assword=k3y"),
            "postgresql://db/ids?ssl%70assword=***");
  EXPECT_EQ(scrub_postgres_password("bad value \"k3y-pass\"", "host=db sslpassword=k3y-pass"),
            "bad value \"***\"");
}

TEST(PostgresUrlTest, ParseErrorsNeverQuoteThePassword) {
  // libpq quotes a malformed percent-encoded token, here the password itself.
  const Status st = check_postgres_url("postgresql://flurry:s3cr%zzet@db/ids");
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.message().find("s3cr"), std::string::npos) << st.message();
  EXPECT_NE(st.message().find("***"), std::string::npos) << st.message();

  // Every malformed escape libpq refuses (RFC 3986's: '%' and two hex digits; libpq also
  // refuses %00): the string is refused with libpq's reason, and the password, as written or
  // decoded, is not in the message.
  for (const char* url :
       {"postgresql://flurry:s3cret%@db/ids", "postgresql://flurry:s3cret%4@db/ids",
        "postgresql://flurry:s3cret%4g@db/ids", "postgresql://flurry:s3c%41ret%zz@db/ids",
        "postgresql://flurry:s3cret%00@db/ids", "postgresql://db/ids?password=s3cret%zz",
        "postgresql://db/ids?pass%77ord=s3cret%2", "postgresql://db/ids?sslpassword=s3cret%%41"}) {
    const Status bad = check_postgres_url(url);
    ASSERT_FALSE(bad.ok()) << url;
    EXPECT_EQ(bad.code(), StatusCode::kInvalidArgument) << bad.to_string();
    EXPECT_NE(bad.message().find("percent-encoded"), std::string::npos) << bad.message();
    EXPECT_EQ(bad.message().find("s3c"), std::string::npos) << bad.message();
    EXPECT_NE(bad.message().find("***"), std::string::npos) << bad.message();
  }
  // A well-formed one is libpq's decoded value: masked as written and as decoded. '+' stays a
  // '+' (libpq's URLs are not form-encoded).
  EXPECT_EQ(scrub_postgres_password("s3cret s3cr%65t", "postgresql://u:s3cr%65t@h/d"), "*** ***");
  EXPECT_EQ(scrub_postgres_password("a+b+c+d a b c d", "postgresql://h/d?password=a+b+c+d"),
            "*** a b c d");

  EXPECT_EQ(scrub_postgres_password("bad \"s3cret\" and s3cret", "host=h password=s3cret"),
            "bad \"***\" and ***");
  // A short password is masked where quoted only, so that the message stays readable.
  EXPECT_EQ(scrub_postgres_password("token \"ab\" about", "postgresql://u:ab@h/d"),
            "token \"***\" about");
}

}  // namespace
// The TLS settings are typed once, in either form; an sslmode libpq does not know is refused at
// parse, not found at the first connection.
TEST(PostgresUrlTest, TypesTheTlsAndPasswordFileSettings) {
  for (const char* text :
       {"postgresql://flurry@db/ids?sslmode=verify-full&sslrootcert=/etc/ca.pem&sslcert=/c.pem"
        "&sslkey=/k.pem&sslpassword=k3y-pass&passfile=/etc/flurry/pgpass",
        "host=db dbname=ids sslmode=verify-full sslrootcert=/etc/ca.pem sslcert=/c.pem "
        "sslkey=/k.pem sslpassword=k3y-pass passfile=/etc/flurry/pgpass"}) {
    Result<PostgresUrl> url = PostgresUrl::parse(text);
    ASSERT_TRUE(url.ok()) << url.status().to_string();
    const PostgresTls& tls = url->tls();
    ASSERT_TRUE(tls.mode.has_value()) << text;
    EXPECT_EQ(*tls.mode, PgSslMode::kVerifyFull);
    EXPECT_EQ(tls.root_cert, "/etc/ca.pem");
    EXPECT_EQ(tls.cert, "/c.pem");
    EXPECT_EQ(tls.key, "/k.pem");
    EXPECT_TRUE(tls.key_password_set);
    EXPECT_EQ(tls.passfile, "/etc/flurry/pgpass");
    EXPECT_EQ(url->redacted().find("k3y-pass"), std::string::npos) << url->redacted();
    EXPECT_NE(url->redacted().find("sslrootcert=/etc/ca.pem"), std::string::npos)
        << url->redacted();
  }
  Result<PostgresUrl> plain = PostgresUrl::parse("host=db dbname=ids");
  ASSERT_TRUE(plain.ok());
  EXPECT_FALSE(plain->tls().mode.has_value());
  EXPECT_FALSE(plain->tls().key_password_set);
  for (const char* mode : {"disable", "allow", "prefer", "require", "verify-ca", "verify-full"}) {
    Result<PostgresUrl> url = PostgresUrl::parse(std::string("host=db sslmode=") + mode);
    ASSERT_TRUE(url.ok()) << mode;
    EXPECT_EQ(to_string(*url->tls().mode), mode);
  }
  Result<PostgresUrl> typo = PostgresUrl::parse("postgresql://u:s3cret@db/ids?sslmode=verify_full");
  ASSERT_FALSE(typo.ok());
  EXPECT_EQ(typo.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(typo.status().message().find("\"verify_full\" is not one of"), std::string::npos)
      << typo.status().message();
  EXPECT_EQ(typo.status().message().find("s3cret"), std::string::npos) << typo.status().message();
}

// libpq's default sslmode=prefer can be stripped by a man in the middle: warned of for a remote
// host when neither the string nor PGSSLMODE names a mode, never for loopback or a Unix socket.
TEST(PostgresUrlTest, WarnsOfADowngradableConnectionToARemoteHost) {
  const auto warning = [](const char* text, const char* env_sslmode = nullptr,
                          const char* env_host = nullptr) {
    Result<PostgresUrl> url = PostgresUrl::parse(text);
    EXPECT_TRUE(url.ok()) << text;
    return postgres_downgrade_warning(*url, "postgres_url", env_sslmode, env_host);
  };
  const std::optional<std::string> remote = warning("postgresql://flurry:s3cret@db.example/ids");
  ASSERT_TRUE(remote.has_value());
  EXPECT_NE(remote->find("postgres_url postgresql://flurry:***@db.example/ids"), std::string::npos)
      << *remote;
  EXPECT_NE(remote->find("sslmode=verify-full"), std::string::npos) << *remote;
  EXPECT_EQ(remote->find("s3cret"), std::string::npos) << *remote;
  EXPECT_TRUE(warning("host=localhost,db.example dbname=ids").has_value());
  EXPECT_TRUE(warning("host=localhost hostaddr=10.0.0.7 dbname=ids").has_value());
  EXPECT_TRUE(warning("dbname=ids", nullptr, "db.example").has_value());
  // Named modes, even weak ones, are the operator's choice; PGSSLMODE counts as named.
  EXPECT_FALSE(warning("postgresql://db.example/ids?sslmode=prefer").has_value());
  EXPECT_FALSE(warning("postgresql://db.example/ids?sslmode=verify-full").has_value());
  EXPECT_FALSE(warning("postgresql://db.example/ids", "verify-full").has_value());
  // Nothing to intercept on loopback or a Unix socket.
  EXPECT_FALSE(warning("postgresql://127.0.0.1:5432/ids").has_value());
  EXPECT_FALSE(warning("postgresql://[::1]/ids").has_value());
  EXPECT_FALSE(warning("postgresql://localhost/ids").has_value());
  EXPECT_FALSE(warning("postgresql:///ids?host=/run/postgresql").has_value());
  EXPECT_FALSE(warning("dbname=ids").has_value());
}

}  // namespace flurry::internal
