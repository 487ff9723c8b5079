// Integration tests against real servers started by clients/conformance/fleet.py (a-h of the
// client contract's proofs). Each test that changes the fleet puts it back at its end.
import { test, after } from "node:test";
import assert from "node:assert/strict";
import { Client, FlurryError, FlurrySettingsError } from "../dist/index.js";

const env = (name) => {
  const v = process.env[name];
  if (!v) throw new Error(`${name} is not set: run under clients/conformance/fleet.py`);
  return v;
};
const ENDPOINTS = env("FLURRY_TEST_ENDPOINTS").split(",");
const SERVERS = env("FLURRY_TEST_SERVERS").split(",");
const CONTROL = env("FLURRY_TEST_CONTROL");

const clients = [];
const client = (options) => {
  const c = new Client(options);
  clients.push(c);
  return c;
};
after(() => clients.forEach((c) => c.close()));

async function control(method, path) {
  const r = await fetch(CONTROL + path, { method });
  const body = await r.json();
  assert.equal(r.status, 200, `${method} ${path}: ${JSON.stringify(body)}`);
  return body;
}
const stats = (i) => control("GET", `/servers/${i}/stats`);
const reset = (i) => control("POST", `/servers/${i}/reset`);

/** flurry_http_requests_total{route="/v1/ids",code=...} of server i, summed over `codes`. */
async function idRequests(i, codes = ["200"]) {
  const text = await (await fetch(SERVERS[i] + "/metrics")).text();
  let sum = 0;
  for (const line of text.split("\n")) {
    const m = /^flurry_http_requests_total\{route="\/v1\/ids",code="(\d+)"\} (\d+)/.exec(line);
    if (m && codes.includes(m[1])) sum += Number(m[2]);
  }
  return sum;
}
async function nodeOf(i) {
  return (await (await fetch(SERVERS[i] + "/readyz")).json()).node;
}
/** Compares decimal IDs without BigInt: shorter is smaller. */
const less = (a, b) => a.length < b.length || (a.length === b.length && a < b);
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

test("a: 10^6 IDs from 32 callers: distinct, increasing per caller, one refill in flight, few requests", async () => {
  const c = client({ endpoints: ENDPOINTS });
  await reset(0);
  const before = await idRequests(0);
  const total = 1_000_000;
  const callers = 32;
  const perCaller = total / callers;
  const seen = new Set();
  await Promise.all(
    Array.from({ length: callers }, async () => {
      let prev = "";
      for (let i = 0; i < perCaller; i++) {
        const id = await c.next();
        assert.ok(prev === "" || less(prev, id), `not increasing: ${prev} then ${id}`);
        prev = id;
        seen.add(id);
      }
    }),
  );
  assert.equal(seen.size, total);
  const s = await stats(0);
  assert.ok(s.ids.max_in_flight <= 1, `max_in_flight ${s.ids.max_in_flight}`);
  const grew = (await idRequests(0)) - before;
  assert.ok(grew <= 100 && grew > 0, `/v1/ids requests grew by ${grew}`);
  assert.equal(s.ids.requests, grew);
});

test("b: max age: no ID handed out is older than maxAge, even after the buffer idled", async () => {
  const c = client({ endpoints: ENDPOINTS, maxAge: 200 });
  await c.next();
  for (let round = 0; round < 3; round++) {
    await sleep(400);
    const requestsBefore = (await stats(0)).ids.requests;
    for (let i = 0; i < 50; i++) {
      const wall = Date.now();
      const id = await c.next();
      const d = await c.decode(id);
      assert.ok(d.unixMs >= wall - 200 - 1, `round ${round}: ID ${id} of ${d.time} handed out at ${new Date(wall).toISOString()}`);
    }
    assert.ok((await stats(0)).ids.requests > requestsBefore, "no new ID request after the idle");
  }
});

test("c: 503 with Retry-After is retried after the time asked; a short timeout fails fast with the reason", async () => {
  const c = client({ endpoints: [ENDPOINTS[0]] });
  try {
    await reset(0);
    await control("POST", "/servers/0/fault?status=503&count=2&retry_after=1&reason=LEASE_EXPIRING");
    let t0 = performance.now();
    await c.next();
    let took = performance.now() - t0;
    assert.ok(took >= 2000 && took < 5000, `took ${took} ms`);
    assert.equal((await stats(0)).faulted, 2);

    const fast = client({ endpoints: [ENDPOINTS[0]], timeout: 500 });
    await control("POST", "/servers/0/fault?status=503&count=1&retry_after=1&reason=LEASE_EXPIRING");
    t0 = performance.now();
    await assert.rejects(fast.next(), (e) => {
      assert.ok(e instanceof FlurryError);
      assert.equal(e.code, "UNAVAILABLE");
      assert.equal(e.reason, "LEASE_EXPIRING");
      assert.equal(e.httpStatus, 503);
      assert.equal(e.retryAfter, 1);
      assert.equal(e.endpoint, ENDPOINTS[0]);
      return true;
    });
    took = performance.now() - t0;
    assert.ok(took < 500, `failed after ${took} ms`);

    // A per-call timeout is the deadline of the refill the call starts: the same fast failure.
    const perCall = client({ endpoints: [ENDPOINTS[0]] });
    await control("POST", "/servers/0/fault?status=503&count=1&retry_after=1&reason=LEASE_EXPIRING");
    t0 = performance.now();
    await assert.rejects(perCall.next({ timeout: 500 }), (e) => e.code === "UNAVAILABLE" && e.reason === "LEASE_EXPIRING");
    took = performance.now() - t0;
    assert.ok(took < 500, `failed after ${took} ms`);
  } finally {
    await control("POST", "/servers/0/fault?status=503&count=0");
  }
});

test("d: a 4xx is raised at once and never retried", async () => {
  const c = client({ endpoints: ENDPOINTS });
  try {
    await reset(0);
    await assert.rejects(c.segment("no-such-tag").next(), (e) => e.code === "NOT_FOUND" && e.httpStatus === 404);
    assert.equal((await stats(0)).segments.requests, 1);
    const tooLarge = client({ endpoints: ENDPOINTS, segmentRange: 50_000 });
    await assert.rejects(tooLarge.segment("orders").next(), (e) => e.code === "OUT_OF_RANGE" && e.httpStatus === 400);
    assert.equal((await stats(0)).segments.requests, 2);

    await c.decode("0"); // the layout is read: the next request is the ID request
    await reset(0);
    await control("POST", "/servers/0/fault?status=400&count=1&code=INVALID_ARGUMENT&reason=INJECTED");
    await assert.rejects(c.next(), (e) => e.code === "INVALID_ARGUMENT" && e.reason === "INJECTED" && e.httpStatus === 400);
    const s = await stats(0);
    assert.equal(s.ids.requests, 1);
    assert.equal(s.faulted, 1);
    assert.equal((await stats(1)).ids.requests, 0);
  } finally {
    await control("POST", "/servers/0/fault?status=400&count=0");
    await reset(1);
  }
});

test("e: failover to server 1 when server 0 is killed, no ID twice", async () => {
  const node1 = await nodeOf(1);
  const c = client({ endpoints: ENDPOINTS });
  const seen = new Set();
  const take = async () => {
    const id = await c.next();
    assert.ok(!seen.has(id), `ID ${id} twice`);
    seen.add(id);
    return id;
  };
  try {
    for (let i = 0; i < 1000; i++) await take();
    await control("POST", "/servers/0/kill");
    let fromServer1 = 0;
    for (let i = 0; i < 100_000 && fromServer1 < 1000; i++) {
      const id = await take();
      if ((await c.decode(id)).node === node1) fromServer1++;
    }
    assert.equal(fromServer1, 1000);
  } finally {
    await control("POST", "/servers/0/start");
  }
});

test("f: server 0 killed while a refill is in flight: the waiting call gets an ID from server 1", async () => {
  const node1 = await nodeOf(1);
  const c = client({ endpoints: ENDPOINTS });
  try {
    await control("POST", "/servers/0/delay?ms=3000&count=1");
    const t0 = performance.now();
    const pending = c.next();
    await sleep(300);
    await control("POST", "/servers/0/kill");
    const id = await pending;
    const took = performance.now() - t0;
    assert.ok(took < 2500, `took ${took} ms`);
    assert.equal((await c.decode(id)).node, node1);
  } finally {
    await control("POST", "/servers/0/delay?ms=0&count=0");
    await control("POST", "/servers/0/start");
  }
});

test("g: segment numbers from 8 callers: distinct, increasing per caller, one range request in flight", async () => {
  await reset(0);
  await reset(1);
  const c = client({ endpoints: ENDPOINTS, segmentRange: 100 });
  const seg = c.segment("orders");
  assert.equal(c.segment("orders"), seg);
  const seen = new Set();
  await Promise.all(
    Array.from({ length: 8 }, async () => {
      let prev = -1n;
      for (let i = 0; i < 625; i++) {
        const v = await seg.nextBigInt();
        assert.ok(v > prev, `not increasing: ${prev} then ${v}`);
        prev = v;
        seen.add(v);
      }
    }),
  );
  assert.equal(seen.size, 5000);
  const s0 = await stats(0);
  const s1 = await stats(1);
  assert.ok(s0.segments.requests + s1.segments.requests >= 50, `${s0.segments.requests} range requests`);
  assert.ok(s0.segments.max_in_flight <= 1 && s1.segments.max_in_flight <= 1);
});

test("h: settings are validated at construction, naming the setting", () => {
  const bad = [
    [{ endpoints: [] }, "endpoints"],
    [{ endpoints: "ftp://x" }, "endpoints"],
    [{ endpoints: "not a url" }, "endpoints"],
    [{ endpoints: ENDPOINTS, minBatch: 100, maxBatch: 10 }, "minBatch"],
    [{ endpoints: ENDPOINTS, minBatch: 0 }, "minBatch"],
    [{ endpoints: ENDPOINTS, lowWater: 1 }, "lowWater"],
    [{ endpoints: ENDPOINTS, lowWater: 0 }, "lowWater"],
    [{ endpoints: ENDPOINTS, segmentPrefetch: 1.5 }, "segmentPrefetch"],
    [{ endpoints: ENDPOINTS, maxAge: 0 }, "maxAge"],
    [{ endpoints: ENDPOINTS, timeout: -1 }, "timeout"],
    [{ endpoints: ENDPOINTS, segmentRange: 0.5 }, "segmentRange"],
  ];
  bad.push([{ endpoints: ENDPOINTS, token: "" }, "token"], [{ endpoints: ENDPOINTS, token: "a\nb" }, "token"]);
  for (const [options, name] of bad) {
    assert.throws(
      () => new Client(options),
      (e) =>
        e instanceof RangeError &&
        e instanceof FlurrySettingsError &&
        e.code === "INVALID_ARGUMENT" &&
        e.setting === name &&
        e.message.startsWith(`${name}: `),
      JSON.stringify(options),
    );
  }
});

const ADMIN_TOKEN = env("FLURRY_TEST_ADMIN_TOKEN");

async function orderNumber(tag) {
  const r = await fetch(`${SERVERS[0]}/v1/order-numbers?count=1${tag ? `&tag=${tag}` : ""}`);
  assert.equal(r.status, 200);
  return (await r.json()).order_numbers[0];
}

test("h: decodeOrder gives a DecodedOrder of either variant, with the client's or the call's token", async () => {
  const code = await orderNumber();
  const segCode = await orderNumber("orders");
  const c = client({ endpoints: ENDPOINTS, token: ADMIN_TOKEN });
  const o = await c.decodeOrder(code);
  assert.equal(o.source, "snowflake");
  assert.equal(o.orderNumber, code);
  assert.equal(o.keyVersion, "1");
  assert.ok(!("tag" in o));
  assert.deepEqual(o.decoded, await c.decode(o.id));
  const s = await c.decodeOrder(segCode, { tag: "orders" });
  assert.equal(s.source, "segment");
  assert.equal(s.tag, "orders");
  assert.equal(s.orderNumber, segCode);
  assert.ok(!("decoded" in s) && BigInt(s.id) > 0n);
  const last = code.at(-1);
  const typo = code.slice(0, -1) + String((Number(last) + 1) % 10);
  await assert.rejects(c.decodeOrder(typo), (e) => e.code === "INVALID_ARGUMENT" && e.httpStatus === 400);
  const anon = client({ endpoints: ENDPOINTS });
  await assert.rejects(anon.decodeOrder(code), (e) => e.code === "UNAUTHENTICATED" && e.httpStatus === 401);
  assert.deepEqual(await anon.decodeOrder(code, { token: ADMIN_TOKEN }), o);
});

const isClosed = (e) =>
  e instanceof FlurryError && e.code === "CANCELLED" && e.message === "the client is closed" && e.reason === "" && e.httpStatus === 0;

test("close() ends every call: those after it and those waiting on it, at once, with CANCELLED", async () => {
  const HELD = 8000;
  const code = await orderNumber();
  const c = client({ endpoints: ENDPOINTS, token: ADMIN_TOKEN, timeout: 60000 });
  await c.decode("1"); // the layout is read before the servers are held
  const seg = c.segment("orders");
  try {
    for (let i = 0; i < ENDPOINTS.length; i++) await control("POST", `/servers/${i}/delay?ms=${HELD}&count=100`);
    const calls = [c.next(), c.next(), c.next(100), seg.next(), c.decodeOrder(code)];
    await new Promise((r) => setTimeout(r, 1000)); // every call is now waiting
    const t0 = performance.now();
    c.close();
    const results = await Promise.allSettled(calls);
    const took = performance.now() - t0;
    results.forEach((r, k) => assert.ok(r.status === "rejected" && isClosed(r.reason), `call ${k}: ${r.status} ${r.reason ?? r.value}`));
    assert.ok(took < HELD - 2000, `the calls ended ${took} ms after close(), as late as the held answers`);
    c.close(); // idempotent
    for (const call of [() => c.next(), () => c.next(10), () => seg.next(), () => c.decode("1"), () => c.decodeOrder(code)]) {
      await assert.rejects(call(), isClosed);
    }
    // A range held when close() runs is dropped: none of its numbers comes out after.
    const holder = client({ endpoints: ENDPOINTS });
    for (let i = 0; i < ENDPOINTS.length; i++) await control("POST", `/servers/${i}/delay?ms=0&count=0`);
    await holder.segment("orders").next();
    holder.close();
    await assert.rejects(holder.segment("orders").next(), isClosed);
    for (let i = 0; i < ENDPOINTS.length; i++) {
      await control("POST", `/servers/${i}/delay?ms=0&count=0`);
      await control("POST", `/servers/${i}/fault?status=503&retry_after=30&count=100`);
    }
    const w = client({ endpoints: ENDPOINTS, timeout: 60000 });
    const waiting = w.next(5); // its own request, waiting 30 s between rounds
    await new Promise((r) => setTimeout(r, 1000));
    const t1 = performance.now();
    w.close();
    await assert.rejects(waiting, isClosed);
    assert.ok(performance.now() - t1 < 10000);
  } finally {
    for (let i = 0; i < ENDPOINTS.length; i++) {
      await control("POST", `/servers/${i}/delay?ms=0&count=0`);
      await control("POST", `/servers/${i}/fault?status=503&count=0`);
    }
  }
});

test("h: decode by the server's layout equals GET /v1/ids/{id}", async () => {
  const c = client({ endpoints: ENDPOINTS });
  const ids = await c.next(20);
  assert.equal(ids.length, 20);
  for (const id of ids) {
    const mine = await c.decode(id);
    const theirs = await (await fetch(`${SERVERS[0]}/v1/ids/${id}`)).json();
    assert.deepEqual(
      { time: mine.time, unix_ms: mine.unixMs, ticks: mine.ticks, node: mine.node, seq: mine.seq, fields: Object.fromEntries(mine.fields.map((f) => [f.name, f.value])) },
      { time: theirs.time, unix_ms: theirs.unix_ms, ticks: theirs.ticks, node: theirs.node, seq: theirs.seq, fields: theirs.fields },
    );
    assert.equal(mine.id, theirs.id);
  }
  await assert.rejects(c.decode("9223372036854775808"), (e) => e.code === "INVALID_ARGUMENT");
});

/** A sleep that only records what it was asked to wait (ms): retries without waiting. */
function recordingSleep() {
  const waits = [];
  const sleep = async (ms) => {
    waits.push(Math.round(ms));
  };
  return { waits, sleep };
}

test("retry: Retry-After 1 three times gives three waits of 1 s (jitter 0), then success", async () => {
  const { waits, sleep } = recordingSleep();
  const c = client({ endpoints: [ENDPOINTS[0]], sleep, random: () => 0 });
  try {
    await reset(0);
    await control("POST", "/servers/0/fault?status=503&count=3&retry_after=1&reason=CLOCK_BEHIND");
    await c.next();
    assert.deepEqual(waits, [1000, 1000, 1000]);
    assert.equal((await stats(0)).faulted, 3);
  } finally {
    await control("POST", "/servers/0/fault?status=503&count=0");
  }
});

test("failover: 503 without Retry-After moves to the next endpoint at once and stays there", async () => {
  const node1 = await nodeOf(1);
  const { waits, sleep } = recordingSleep();
  const c = client({ endpoints: ENDPOINTS, sleep });
  try {
    await reset(0);
    await reset(1);
    await control("POST", "/servers/0/fault?status=503&count=1&code=FAILED_PRECONDITION&reason=LEASE_LOST");
    for (let i = 0; i < 2000; i++) assert.equal((await c.decode(await c.next())).node, node1);
    assert.deepEqual(waits, []);
    // Server 0 saw the one faulted ID request only; every later refill went to server 1.
    const s0 = await stats(0);
    assert.equal(s0.ids.requests, 1);
    assert.equal(s0.faulted, 1);
    assert.ok((await stats(1)).ids.requests >= 2);

    // Every endpoint out: the last answer's error, no wait.
    const d = client({ endpoints: ENDPOINTS, sleep });
    await control("POST", "/servers/0/fault?status=503&count=1&code=FAILED_PRECONDITION&reason=LEASE_LOST");
    await control("POST", "/servers/1/fault?status=503&count=1&code=FAILED_PRECONDITION&reason=TIME_EXHAUSTED");
    await assert.rejects(d.next(), (e) => e.code === "FAILED_PRECONDITION" && e.reason === "TIME_EXHAUSTED" && e.endpoint === ENDPOINTS[1]);
    assert.deepEqual(waits, []);
  } finally {
    await control("POST", "/servers/0/fault?status=503&count=0");
    await control("POST", "/servers/1/fault?status=503&count=0");
  }
});

test("tryNext(): undefined on a fresh client, which starts the refill; IDs once it arrived", async () => {
  const c = client({ endpoints: ENDPOINTS });
  await reset(0);
  assert.equal(c.tryNext(), undefined);
  let id;
  for (let i = 0; i < 500 && id === undefined; i++) {
    await sleep(10);
    id = c.tryNext();
  }
  assert.match(id, /^[0-9]+$/);
  assert.equal((await stats(0)).ids.requests, 1);
  const many = await c.nextBigInt(100);
  assert.equal(many.length, 100);
  assert.equal(typeof many[0], "bigint");
  assert.ok(many.every((v, i) => i === 0 || v > many[i - 1]));
});

test("an aborted signal ends a waiting call at once with CANCELLED", async () => {
  const c = client({ endpoints: [ENDPOINTS[0]] });
  await c.decode("0"); // the layout is read: the next request is the held ID request
  try {
    await control("POST", "/servers/0/delay?ms=3000&count=1");
    const abort = new AbortController();
    const t0 = performance.now();
    const pending = c.next({ signal: abort.signal });
    setTimeout(() => abort.abort(), 100);
    await assert.rejects(pending, (e) => e instanceof FlurryError && e.code === "CANCELLED");
    const took = performance.now() - t0;
    assert.ok(took < 1000, `took ${took} ms`);
  } finally {
    c.close();
    await control("POST", "/servers/0/delay?ms=0&count=0");
  }
});

test("batch size doubles when the buffer ran low and halves when IDs expired (fake clock)", async () => {
  const t = { now: 0 };
  const c = client({ endpoints: ENDPOINTS, minBatch: 16, maxBatch: 64, maxAge: 1000, clock: () => t.now });
  const size = () => c["sizer"].current;
  const waitForRefill = async () => {
    while (c["refilling"] !== undefined) await c["refilling"].catch(() => {});
  };
  await c.next();
  assert.equal(size(), 16);
  for (let i = 0; i < 8; i++) await c.next(); // 7 left < 0.5 × 16: a refill of 32
  await waitForRefill();
  assert.equal(size(), 32);
  assert.equal(c["buffered"], 7 + 32);
  for (let i = 0; i < 30; i++) await c.next(); // 9 left < 16: a refill of 64
  await waitForRefill();
  assert.equal(size(), 64);
  t.now += 1001; // everything in the buffer is now too old
  await c.next(); // dropped whole; the refill after an expiry halves
  assert.equal(size(), 32);
  assert.equal(c["buffered"], 31);
});

// ---- tso(): the fleet's servers run with --tso (two servers sharing one SQLite registry, so one
// leads the timestamp oracle and the other redirects to it; docs/clients.md, "Timestamps").


/** The index of the server that leads the timestamp oracle (GET /readyz/tso 200 on it). */
async function tsoLeader() {
  for (const end = Date.now() + 30_000; Date.now() < end; await sleep(50)) {
    for (let i = 0; i < SERVERS.length; i++) {
      try {
        if ((await fetch(SERVERS[i] + "/readyz/tso")).status === 200) return i;
      } catch {
        // not up
      }
    }
  }
  throw new Error("no server leads the timestamp oracle after 30 s");
}

const increasing = (values) => values.every((v, i) => i === 0 || v > values[i - 1]);

test("tso: sequential calls increase strictly, within one client and across two", async () => {
  await tsoLeader(); // a test before may have killed the leader: wait out the election
  const c = client({ endpoints: ENDPOINTS });
  const values = [];
  for (let i = 0; i < 500; i++) values.push(await c.tsoBigInt());
  assert.ok(increasing(values));
  const a = client({ endpoints: ENDPOINTS[0] });
  const b = client({ endpoints: ENDPOINTS[1] });
  for (let i = 0; i < 50; i++) values.push(await a.tsoBigInt(), await b.tsoBigInt());
  assert.ok(increasing(values), "a call that began after another ended must get a larger value");
  assert.equal(typeof (await c.tso()), "string");
});

test("tso: 64 concurrent callers: distinct values, each caller's increasing, one request in flight, shared requests", async () => {
  const leader = await tsoLeader();
  // Only the leader's proxy: every request passes it and is counted, none is redirected.
  const c = client({ endpoints: ENDPOINTS[leader] });
  await reset(leader);
  const callers = 64;
  const each = 50;
  const per = await Promise.all(
    Array.from({ length: callers }, async () => {
      const out = [];
      for (let i = 0; i < each; i++) out.push(await c.tsoBigInt());
      return out;
    }),
  );
  for (const values of per) assert.ok(increasing(values), "a caller's timestamps must strictly increase");
  assert.equal(new Set(per.flat()).size, callers * each);
  const s = (await stats(leader)).tso;
  assert.equal(s.max_in_flight, 1);
  assert.ok(s.requests * 2 <= callers * each, `${s.requests} requests for ${callers * each} calls`);
});

test("tso: callers arriving while a request is held share the next request, never the held one", async () => {
  const leader = await tsoLeader();
  const c = client({ endpoints: ENDPOINTS[leader] });
  await c.tso();
  await reset(leader);
  await control("POST", `/servers/${leader}/delay?ms=1000&count=1`);
  const held = c.tsoBigInt();
  await sleep(200); // the held request is at the proxy now
  const late = await Promise.all(Array.from({ length: 8 }, () => c.tsoBigInt()));
  const first = await held;
  assert.equal((await stats(leader)).tso.requests, 2, "the held request, then one for the 8 callers");
  const sorted = [...late].sort((x, y) => (x < y ? -1 : x > y ? 1 : 0));
  assert.equal(new Set(late).size, 8);
  assert.ok(sorted[0] > first);
  assert.equal(sorted[7] - sorted[0], 7n, "one grant of 8 consecutive values");
});

test("tso: a follower's redirect is followed, and the leader is asked directly afterwards", async () => {
  const leader = await tsoLeader();
  const follower = 1 - leader;
  const c = client({ endpoints: ENDPOINTS[follower] });
  await reset(follower);
  const values = [];
  for (let i = 0; i < 100; i++) values.push(await c.tsoBigInt());
  assert.ok(increasing(values));
  assert.equal((await stats(follower)).tso.requests, 1, "only the first request reached the follower");
});

test("tso: after the leader is killed the client goes back to its endpoints", async () => {
  const leader = await tsoLeader();
  const follower = 1 - leader;
  const c = client({ endpoints: ENDPOINTS[follower], timeout: 60_000 });
  try {
    const before = await c.tsoBigInt(); // redirected: the client now asks the leader directly
    await control("POST", `/servers/${leader}/kill`);
    const after = await c.tsoBigInt(); // refused by the dead leader: the follower, until it leads
    assert.ok(after > before);
    assert.equal(await tsoLeader(), follower);
  } finally {
    await control("POST", `/servers/${leader}/start`);
  }
});
