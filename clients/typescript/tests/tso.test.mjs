// tso() against the fleet's real servers, run with --tso: two servers sharing one SQLite
// registry, so one leads the timestamp oracle and the other redirects to it (docs/clients.md,
// "Timestamps"). Each test that changes the fleet puts it back at its end.
import { test, after } from "node:test";
import assert from "node:assert/strict";
import { Client } from "../dist/index.js";

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
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

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
