#!/usr/bin/env python3
"""The response budget: large responses waiting for slow readers cannot grow without bound.

The server runs with response_budget 8 MiB (FLURRY_RESPONSE_BUDGET) and a layout with 18
sequence bits. 40 connections with a 4 KiB receive buffer each ask for 100,000 IDs (about 2.2 MB
of JSON) and do not read for a while, so the responses wait in the server. Those that do not fit
the budget must be answered 503 RESOURCE_EXHAUSTED with reason RESPONSE_BUDGET and Retry-After,
the others 200 with their IDs; all IDs handed out are unique, the server never crashes, counts
the refusals (flurry_http_response_budget_refusals_total), holds no response bytes once all are
read (flurry_http_response_bytes 0), and answers the same request 200 afterwards. A second round
does the same with order numbers of 25,000 IDs. A server slow enough (ASan) to build some
responses after the readers stalled for a second may drop a stalled one for room (the fair share):
such a response is cut off and counted in flurry_http_response_budget_evictions_total.
Before the fix every response was built and
kept (40 x 2.2 MB here; without bound in general): no 503 at all.

Usage: response_budget.py FLURRY
"""
import json
import os
import socket
import sys
import time

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness as h  # noqa: E402

BUDGET = 8 << 20
CONNECTIONS = 40
COUNT = 100000
# Order numbers cost an FF1 encryption each: fewer per request keep the round within the request
# deadline under ASan too, and 40 of them (about 0.6 MB each) still exceed the budget.
ORDER_COUNT = 25000
LAYOUT = "time:39@1ms,node:6,seq:18;epoch=2025-01-01Z"


def slow_reader(port):
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)  # before connect: a small window
    s.settimeout(30)
    s.connect(("127.0.0.1", port))
    return s


def round_of(port, path, what):
    socks = [slow_reader(port) for _ in range(CONNECTIONS)]
    for s in socks:
        s.sendall(f"GET {path} HTTP/1.1\r\nHost: localhost\r\n\r\n".encode())
    time.sleep(1.0)  # every request is answered or refused by now; none read yet
    ok, refused, dropped = [], 0, 0
    for s in socks:
        # These readers stall for a second on purpose: when a slow server (ASan) builds the later
        # responses after that, it may drop a stalled one to make room (the fair share,
        # docs/operations.md): its connection closes before the end, counted in the metric below.
        try:
            r = h.raw_read_response(s, timeout=30)
        except h.TestFailure as e:
            if "cut short" not in str(e):
                raise
            r = None
        if r is None:
            dropped += 1
            s.close()
            continue
        if r.status == 200:
            ok.append(r.json())
        else:
            err = h.check_error_body(r, 503, what, code="RESOURCE_EXHAUSTED", reason="RESPONSE_BUDGET")
            h.check(r.headers.get("retry-after") == "1", f"{what}: a 503 without Retry-After: 1: {r.headers}")
            h.check("response_budget" in err["message"], f"{what}: the message does not name response_budget: {err}")
            refused += 1
        s.close()
    h.log(f"{what}: {len(ok)} answered 200, {refused} refused 503 RESPONSE_BUDGET, {dropped} dropped")
    if dropped:
        evicted = h.metric(h.request(port, "/metrics").text, "flurry_http_response_budget_evictions_total")
        h.check(evicted is not None and evicted >= dropped,
                f"{what}: {dropped} responses cut short, but only {evicted} stalled responses were dropped")
    # What did not fit was refused, or (a slow server) made room by dropping stalled responses.
    h.check(refused + dropped > 0, f"{what}: no request was refused or dropped with {CONNECTIONS} responses "
                                   f"of {COUNT} waiting and response_budget {BUDGET}")
    h.check(ok, f"{what}: every request was refused")
    return ok, refused


def main():
    h.init()
    env = dict(os.environ)
    env["FLURRY_RESPONSE_BUDGET"] = str(BUDGET)
    keys = os.path.join(h.WORK, "order-keys")
    with open(keys, "w") as f:
        f.write("1 = 2b7e151628aed2a6abf7158809cf4f3c\n")
    os.chmod(keys, 0o600)
    srv = h.Server("budget", os.path.join(h.WORK, "data"),
                   ["--layout", LAYOUT, "--order-key-file", keys], env=env).start()
    port = srv.port

    answers, refused_total = round_of(port, f"/v1/ids?count={COUNT}", "IDs")
    ids = []
    for j in answers:
        h.check(len(j["ids"]) == COUNT, f"a 200 with {len(j['ids'])} IDs")
        ids += j["ids"]
    h.check(len(set(ids)) == len(ids), f"{len(ids) - len(set(ids))} duplicate IDs")

    answers, refused = round_of(port, f"/v1/order-numbers?count={ORDER_COUNT}", "order numbers")
    refused_total += refused
    numbers = [n for j in answers for n in j["order_numbers"]]
    h.check(all(len(j["order_numbers"]) == ORDER_COUNT for j in answers), "a 200 without all its order numbers")
    h.check(len(set(numbers)) == len(numbers), f"{len(numbers) - len(set(numbers))} duplicate order numbers")

    h.check(srv.alive(), f"the server exited ({srv.proc.returncode})")
    text = h.request(port, "/metrics").text
    held = h.metric(text, "flurry_http_response_bytes")
    refusals = h.metric(text, "flurry_http_response_budget_refusals_total")
    h.log(f"flurry_http_response_bytes {held}, flurry_http_response_budget_refusals_total {refusals}")
    h.check(held == 0, f"flurry_http_response_bytes {held} with every response sent")
    h.check(refusals is not None and refusals >= refused_total,
            f"flurry_http_response_budget_refusals_total {refusals}, {refused_total} refusals seen")
    after = h.get_ids(port, COUNT)
    h.check(not set(map(str, after)) & set(ids), "IDs after the rounds repeat earlier ones")
    rc, _ = srv.stop()
    h.check(rc == 0, f"exit code {rc} after SIGTERM")


h.run_main(main)
