#!/usr/bin/env python3
"""The C++ client over https (ctest client_cpp_tls): certificates from tests/testing/make_certs.sh,
three real `flurry serve` processes (plain HTTP, HTTPS, HTTPS requiring client certificates), and
the GoogleTest cases Tls.* of flurry_client_cpp_test run against them:

- Tls.PlainClientLoadsNoTls, in a process of its own: a client with only http:// endpoints maps
  neither libssl nor the TLS module;
- Tls.IdsOverHttpsVerifiedAgainstTheCa: 100,000 IDs, a batch and a decode over https verified
  against the test CA; a client of another CA refused (UNAVAILABLE, "certificate verify failed");
  a missing CA file refused by open() naming it;
- Tls.ClientCertificateForAServerThatRequiresOne: mTLS served with a certificate, refused without;
- Orders.DecodeOrderGivesTheTypedValue, against the plain server with an order-number key and an
  admin token: a snowflake order number and a segment tag's number (issued here over HTTP) decode
  to DecodedOrder with the server's ID, the tag variant, the local decode; a mistyped number is
  the server's INVALID_ARGUMENT.

Usage: tls_test.py FLURRY FLURRY_CLIENT_CPP_TEST MODULE_DIR
"""
import json
import os
import subprocess
import sys

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "..", "tests", "integration"))
import harness as h  # noqa: E402
import tlslib as t  # noqa: E402


def gtest(binary, test, env):
    r = subprocess.run([binary, f"--gtest_filter={test}"], capture_output=True, text=True, env=env,
                       timeout=120)
    h.log(f"{test}: exit {r.returncode}")
    h.check(r.returncode == 0, f"{test} failed:\n{r.stdout[-4000:]}\n{r.stderr[-2000:]}")
    h.check("[  PASSED  ] 1 test" in r.stdout and "SKIPPED" not in r.stdout,
            f"{test} did not run:\n{r.stdout[-2000:]}")


def main():
    test_binary = os.path.realpath(sys.argv.pop(2))
    module_dir = os.path.realpath(sys.argv.pop(2))
    h.init()
    certs = t.make_certs(os.path.join(h.WORK, "certs"), "flurry")
    ctx = t.client_context(os.path.join(certs, "ca.pem"))
    no_grpc = ["--grpc-listen", ""]
    token = "cpp-client-order-token-5e1f9a0b7c3d2e8f"
    token_file = os.path.join(h.WORK, "admin-token")
    keys_file = os.path.join(h.WORK, "order-keys")
    for path, text in ((token_file, token + "\n"), (keys_file, "1 = " + "3c" * 16 + "\n")):
        with open(path, "w") as f:
            f.write(text)
        os.chmod(path, 0o600)
    plain = h.Server("plain", os.path.join(h.WORK, "d0"),
                     no_grpc + ["--admin-token-file", token_file, "--order-key-file", keys_file])
    plain.start()
    auth = {"Authorization": f"Bearer {token}"}
    r = h.request(plain.port, "/v1/segments", method="POST", headers=auth,
                  body='{"tag":"orders","start":1,"step":100}')
    h.check(r.status == 201, f"creating the tag: {r}")
    r = h.request(plain.port, "/v1/order-numbers?count=1", headers=auth)
    h.check(r.status == 200, f"an order number: {r}")
    snowflake = r.json()["order_numbers"][0]
    r = h.request(plain.port, "/v1/order-numbers?count=1&tag=orders", headers=auth)
    h.check(r.status == 200, f"a tag's order number: {r}")
    segment = r.json()["order_numbers"][0]
    ids = {}
    for name, code, query in (("snowflake", snowflake, ""), ("segment", segment, "?tag=orders")):
        r = h.request(plain.port, f"/v1/order-numbers/{code}{query}", headers=auth)
        h.check(r.status == 200, f"decoding {code}: {r}")
        ids[name] = r.json()["id"]
    tls = t.start("https", os.path.join(h.WORK, "d1"), t.tls_args(certs) + no_grpc, ctx)
    mtls_ctx = t.client_context(os.path.join(certs, "ca.pem"), os.path.join(certs, "client-flurry.pem"),
                                os.path.join(certs, "client-flurry.key"))
    mtls = t.start("mtls", os.path.join(h.WORK, "d2"), t.tls_args(certs, client_ca=True) + no_grpc,
                   mtls_ctx)
    env = dict(os.environ)
    env.update({
        "FLURRY_MODULE_DIR": module_dir,
        "FLURRY_TLS_CERTS": certs,
        "FLURRY_TLS_PLAIN_SERVER": f"http://127.0.0.1:{plain.port}",
        "FLURRY_TLS_SERVER": f"https://127.0.0.1:{tls.port}",
        "FLURRY_TLS_MTLS_SERVER": f"https://127.0.0.1:{mtls.port}",
        "FLURRY_ORDER_TOKEN": token,
        "FLURRY_ORDER_CASES": json.dumps({"snowflake": [snowflake, ids["snowflake"]],
                                          "segment": [segment, ids["segment"]]}),
    })
    gtest(test_binary, "Tls.PlainClientLoadsNoTls", env)
    gtest(test_binary, "Tls.IdsOverHttpsVerifiedAgainstTheCa", env)
    gtest(test_binary, "Tls.ClientCertificateForAServerThatRequiresOne", env)
    gtest(test_binary, "Orders.DecodeOrderGivesTheTypedValue", env)
    h.log("the C++ client over https: IDs verified against the CA, wrong CA and missing file "
          "refused, mTLS; a plain client maps no TLS; order numbers decoded to DecodedOrder")


if __name__ == "__main__":
    h.run_main(main)
