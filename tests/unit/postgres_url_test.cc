// PostgreSQL connection strings as the registry takes them (src/registry/postgres_conninfo.h):
// which ones are accepted, and that the password never shows, in either form. No server needed.
#include <gtest/gtest.h>

#include <string>

#include "registry/postgres_conninfo.h"

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

  EXPECT_EQ(scrub_postgres_password("bad \"s3cret\" and s3cret", "host=h password=s3cret"),
            "bad \"***\" and ***");
  // A short password is masked where quoted only, so that the message stays readable.
  EXPECT_EQ(scrub_postgres_password("token \"ab\" about", "postgresql://u:ab@h/d"),
            "token \"***\" about");
}

}  // namespace
}  // namespace flurry::internal
