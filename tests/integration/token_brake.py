#!/usr/bin/env python3
"""Guessing and exposure (issue 32, part 7), against the real `flurry serve`:

1. Tokens of low variety stop the start: a token_file line of one repeated letter, and an
   admin_token_file of two letters, each named by file and line and the rule, never the token.
2. The token brake over HTTP: 8 connections from 127.0.0.2 send wrong tokens for 3 s. The tokens
   compared (401 TOKEN_UNKNOWN) stay within the budget docs/operations.md gives (20 at once, then
   10 a second); the rest are 503 with Retry-After, and they were not compared: the RIGHT token
   from the braked address, sent 5 times during the guessing, is refused the same way (at least
   3 times: one may land in the instant a unit of budget comes free). Meanwhile a client on 127.0.0.3 that showed
   its right token before is answered at once (every answer 200, median under the 100 ms an
   unknown token waits).
3. The same brake over gRPC (one implementation): 8 channels from 127.0.0.1 for 3 s; compared
   (UNAUTHENTICATED) within the budget, the rest UNAVAILABLE; the right token from the braked
   address is UNAVAILABLE too; an HTTP client never seen with a right token is braked by the
   guesses made over gRPC (the overall budget is shared), the trusted one is not.
4. Host against DNS rebinding: a foreign name is refused with 400 naming allowed_hosts, on the
   API and the console; IP literals, localhost and names given in --allowed-hosts or
   FLURRY_ALLOWED_HOSTS are served; a bad allowed_hosts stops the start.

Usage: token_brake.py FLURRY PYTHON_STUBS
"""

import http.client
import os
import statistics
import subprocess
import threading
import time

import grpclib as g

h = g.init()

TOKEN = "brake-it-7d2f9a0c4e1b8d3f6a5c2e9b0d4f7a1c"
WRONG = "brake-it-0000wrong1111wrong2222wrong3333"
CLIENT_BURST, CLIENT_RATE = 20, 10  # GuessBrake (src/ops/include/ops/guess_brake.h)
OVERALL_BURST, OVERALL_RATE = 20, 10
DELAY_S = 0.1  # Authorizer::kFailedTokenDelay
PROBE_S = 3.0


def private_file(path, text):
    with open(path, "w") as f:
        f.write(text)
    os.chmod(path, 0o600)
    return path


def http_get(port, path, token=None, source="127.0.0.1", host=None, conn=None):
    own = conn is None
    if own:
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30, source_address=(source, 0))
    headers = {}
    if token:
        headers["Authorization"] = f"Bearer {token}"
    if host is not None:
        headers["Host"] = host
    try:
        conn.request("GET", path, headers=headers)
        r = conn.getresponse()
        return h.Response(r.status, {k.lower(): v for k, v in r.getheaders()}, r.read())
    finally:
        if own:
            conn.close()


def start_refused(work, name, args):
    """Runs flurry serve that must not start; returns its output."""
    data = os.path.join(work, name)
    p = subprocess.run([h.FLURRY, "serve", "--listen", f"127.0.0.1:{h.free_port()}", "--data-dir", data] + args,
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=30)
    h.check(p.returncode != 0, f"{name}: the server started")
    return p.stdout.decode("utf-8", "replace")


def low_variety(work):
    one_letter = "a" * 32
    tokens = private_file(os.path.join(work, "weak-tokens"), f"{TOKEN} ids\n{one_letter} read\n")
    out = start_refused(work, "weak-token-file", ["--token-file", tokens])
    h.check(f'token_file "{tokens}": line 2: the token has only 1 different character' in out, out)
    h.check("aaaa" not in out, f"the token is in the message: {out}")
    admin = private_file(os.path.join(work, "weak-admin"), "ab" * 20 + "\n")
    out = start_refused(work, "weak-admin-file", ["--admin-token-file", admin])
    h.check(f'admin_token_file "{admin}": the token has only 2 different characters' in out, out)
    h.check("abab" not in out, f"the token is in the message: {out}")
    h.log("low-variety tokens stop the start, named by file and line")


def guess_for(seconds, attempt):
    """Runs attempt() on 8 threads for `seconds`; returns the list of their results."""
    results = []
    lock = threading.Lock()
    stop_at = time.monotonic() + seconds

    def run():
        mine = []
        state = {}
        while time.monotonic() < stop_at:
            mine.append(attempt(state))
        with lock:
            results.extend(mine)

    threads = [threading.Thread(target=run) for _ in range(8)]
    for t in threads:
        t.start()
    return threads, results


def probe_during(seconds, probes):
    """Runs each of `probes` (name -> function) 5 times, spread over the guessing (from 1 s on);
    returns name -> list of results."""
    results = {name: [] for name in probes}

    def run():
        started = time.monotonic()
        for k in range(5):
            time.sleep(max(0.0, started + 1.0 + k * (seconds - 1.5) / 5 - time.monotonic()))
            for name, fn in probes.items():
                results[name].append(fn())

    t = threading.Thread(target=run)
    t.start()
    return t, results


def mostly_braked(results, braked, what):
    """At least 3 of 5 probes braked, the others the right answer. One can land in the moment a
    unit of budget comes free (every 100 ms) before a guesser takes it; without the brake none
    is braked."""
    n = sum(1 for r in results if r == braked)
    h.log(f"{what}: {n} of {len(results)} braked")
    h.check(n >= 3, f"{what}: only {n} of {len(results)} braked: {results}")


def http_brake(port):
    # The trusted client shows its right token once, then keeps asking during the guessing.
    h.check(http_get(port, "/v1/layout", TOKEN, source="127.0.0.3").status == 200, "the right token")
    rightful = []
    stop = threading.Event()

    def holder():
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30, source_address=("127.0.0.3", 0))
        while not stop.is_set():
            started = time.monotonic()
            r = http_get(port, "/v1/layout", TOKEN, conn=conn)
            rightful.append((r.status, time.monotonic() - started))
            time.sleep(0.02)
        conn.close()

    def attempt(state):
        if "conn" not in state:
            state["conn"] = http.client.HTTPConnection("127.0.0.1", port, timeout=30,
                                                       source_address=("127.0.0.2", 0))
        r = http_get(port, "/v1/layout", WRONG, conn=state["conn"])
        if r.status == 503:
            h.check(r.headers.get("retry-after") == "1", f"a braked answer without Retry-After: {r}")
            h.check("the token was not checked" in r.text, f"a braked answer: {r}")
            return 503
        h.check(r.status == 401 and r.json()["error"]["reason"] == "TOKEN_UNKNOWN", f"a wrong token: {r}")
        return 401

    keeper = threading.Thread(target=holder)
    keeper.start()
    started = time.monotonic()
    threads, results = guess_for(PROBE_S, attempt)
    # While braked, the right token from the guessing address is refused like a wrong one.
    prober, probes = probe_during(PROBE_S, {"right": lambda: http_get(port, "/v1/layout", TOKEN, source="127.0.0.2")})
    for t in threads + [prober]:
        t.join()
    took = time.monotonic() - started
    stop.set()
    keeper.join()
    compared = results.count(401)
    budget = CLIENT_BURST + CLIENT_RATE * took
    h.log(f"HTTP: {len(results)} wrong tokens on 8 connections in {took:.2f} s: {compared} compared (401), "
          f"{results.count(503)} braked (503); budget {budget:.0f}")
    h.check(compared <= budget, f"{compared} wrong tokens compared in {took:.2f} s, more than {budget:.0f}")
    h.check(compared >= CLIENT_BURST, f"only {compared} wrong tokens compared: the budget is not used")
    right = [r.status for r in probes["right"]]
    h.check(set(right) <= {200, 503}, f"the right token from the braked address: {probes['right']}")
    mostly_braked(right, 503, "HTTP: the right token from the guessing address")
    statuses = {s for s, _ in rightful}
    latencies = [t for _, t in rightful]
    median = statistics.median(latencies)
    h.log(f"HTTP: the trusted client meanwhile: {len(rightful)} answers {sorted(statuses)}, median "
          f"{median * 1000:.1f} ms, max {max(latencies) * 1000:.1f} ms")
    h.check(statuses == {200}, f"the trusted client's right token during the guessing: {sorted(statuses)}")
    h.check(median < DELAY_S, f"the right token's median latency {median * 1000:.1f} ms: held back")


def grpc_brake(port, grpc_port):
    SC = g.grpc.StatusCode

    def layout(token, channel=None):
        own = channel is None
        channel = channel or g.grpc.insecure_channel(f"127.0.0.1:{grpc_port}")
        try:
            g.rpc.IdsStub(channel).Layout(g.pb.LayoutRequest(), metadata=[("authorization", f"Bearer {token}")],
                                          timeout=30)
            return SC.OK, ""
        except g.grpc.RpcError as e:
            return e.code(), e.details()
        finally:
            if own:
                channel.close()

    def attempt(state):
        if "channel" not in state:
            state["channel"] = g.grpc.insecure_channel(f"127.0.0.1:{grpc_port}")
        code, details = layout(WRONG, state["channel"])
        h.check(code in (SC.UNAUTHENTICATED, SC.UNAVAILABLE), f"a wrong token over gRPC: {code} {details!r}")
        if code == SC.UNAVAILABLE:
            h.check("the token was not checked" in details, f"a braked gRPC answer: {details!r}")
        return code

    # Let the budgets of the HTTP part fill again (20 at 10 a second).
    time.sleep(OVERALL_BURST / OVERALL_RATE + 0.5)
    started = time.monotonic()
    threads, results = guess_for(PROBE_S, attempt)
    prober, probes = probe_during(PROBE_S, {
        "grpc_right": lambda: layout(TOKEN)[0],
        "stranger_wrong": lambda: http_get(port, "/v1/layout", WRONG, source="127.0.0.4").status,
        "stranger_right": lambda: http_get(port, "/v1/layout", TOKEN, source="127.0.0.4").status,
        "trusted": lambda: http_get(port, "/v1/layout", TOKEN, source="127.0.0.3").status,
    })
    for t in threads + [prober]:
        t.join()
    took = time.monotonic() - started
    compared = results.count(SC.UNAUTHENTICATED)
    budget = CLIENT_BURST + CLIENT_RATE * took
    h.log(f"gRPC: {len(results)} wrong tokens on 8 channels in {took:.2f} s: {compared} compared "
          f"(UNAUTHENTICATED), {results.count(SC.UNAVAILABLE)} braked (UNAVAILABLE); budget {budget:.0f}")
    h.check(compared <= budget, f"{compared} wrong tokens compared over gRPC in {took:.2f} s, more than {budget:.0f}")
    h.check(compared >= CLIENT_BURST, f"only {compared} wrong tokens compared over gRPC")
    h.check(set(probes["grpc_right"]) <= {SC.OK, SC.UNAVAILABLE}, f"the right token over gRPC: {probes}")
    mostly_braked(probes["grpc_right"], SC.UNAVAILABLE, "gRPC: the right token from the guessing address")
    # The overall budget is one for both transports: HTTP from an address never seen with a
    # right token is braked by the guesses made over gRPC, wrong token or right.
    h.check(set(probes["stranger_wrong"]) <= {401, 503}, f"a new HTTP client's wrong token: {probes}")
    mostly_braked(probes["stranger_wrong"], 503, "HTTP from a new address, a wrong token, during the gRPC guessing")
    h.check(set(probes["stranger_right"]) <= {200, 503}, f"a new HTTP client's right token: {probes}")
    mostly_braked(probes["stranger_right"], 503, "HTTP from a new address, the right token, during the gRPC guessing")
    h.check(probes["trusted"] == [200] * 5, f"the trusted HTTP client during the gRPC guessing: {probes['trusted']}")


def host_check(work, port):
    # The server of the brake parts requires a token everywhere: the trusted client's is sent, so
    # that only Host decides.
    rebound = http_get(port, "/v1/ids?count=1", TOKEN, source="127.0.0.3", host=f"rebind.attacker.example:{port}")
    h.check(rebound.status == 400 and "is not a name of this server" in rebound.text
            and "allowed_hosts" in rebound.text and b'"ids"' not in rebound.body, f"a rebound name: {rebound}")
    console = http_get(port, "/console", host="rebind.attacker.example")
    h.check(console.status == 400, f"the console under a rebound name: {console}")
    for host in (f"127.0.0.1:{port}", f"localhost:{port}", "LOCALHOST.", f"[::1]:{port}"):
        r = http_get(port, "/v1/ids?count=1", TOKEN, source="127.0.0.3", host=host)
        h.check(r.status == 200, f"Host {host}: {r}")
    srv = h.Server("named", os.path.join(work, "named"), args=["--allowed-hosts", "ids.internal.example"],
                   env=dict(os.environ, FLURRY_GRPC_LISTEN="")).start()
    for host, status in (("ids.internal.example", 200), ("IDS.internal.example.:80", 200),
                         ("other.internal.example", 400)):
        r = http_get(srv.port, "/v1/ids?count=1", host=host)
        h.check(r.status == status, f"--allowed-hosts, Host {host}: {r}")
    rc, _ = srv.stop()
    h.check(rc == 0, f"exit code {rc}")
    srv = h.Server("named-env", os.path.join(work, "named-env"),
                   env=dict(os.environ, FLURRY_ALLOWED_HOSTS="a.example, b.example", FLURRY_GRPC_LISTEN="")).start()
    h.check(http_get(srv.port, "/healthz", host="b.example").status == 200, "FLURRY_ALLOWED_HOSTS")
    h.check(http_get(srv.port, "/healthz", host="c.example").status == 400, "a name not in FLURRY_ALLOWED_HOSTS")
    rc, _ = srv.stop()
    h.check(rc == 0, f"exit code {rc}")
    out = start_refused(work, "bad-hosts", ["--allowed-hosts", "http://x.example"])
    h.check('allowed_hosts: "http://x.example" is not a host name' in out, out)
    h.log("Host: rebound names refused, IP literals, localhost and allowed_hosts served")


def main():
    work = h.WORK
    low_variety(work)
    tokens = private_file(os.path.join(work, "tokens"), f"{TOKEN} ids,read\n")
    srv, grpc_port = g.start("brake", os.path.join(work, "data"),
                             args=["--token-file", tokens, "--open-scopes", "none"])
    http_brake(srv.port)
    grpc_brake(srv.port, grpc_port)
    host_check(work, srv.port)
    rc, _ = srv.stop()
    h.check(rc == 0, f"exit code {rc}")
    h.check(TOKEN not in srv.log_text() and WRONG not in srv.log_text(), "a token in the log")


h.run_main(main)
