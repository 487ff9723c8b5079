// Unit tests of the retry loop with a fake clock, sleep and jitter (no real waiting): a port
// nobody listens on refuses every connection, which the contract retries round after round.
import { test } from "node:test";
import assert from "node:assert/strict";
import { createServer } from "node:net";
import { Client, FlurryError } from "../dist/index.js";

/** A local port with nothing listening on it. */
async function deadPort() {
  const s = createServer();
  await new Promise((r) => s.listen(0, "127.0.0.1", r));
  const port = s.address().port;
  await new Promise((r) => s.close(r));
  return port;
}

function fakeTime() {
  const t = { now: 0, waits: [] };
  t.clock = () => t.now;
  t.sleep = async (ms) => {
    t.waits.push(Math.round(ms * 1000) / 1000);
    t.now += ms;
  };
  return t;
}

test("connection errors are retried in rounds with the backoff, and the call stops before its deadline", async () => {
  const t = fakeTime();
  const endpoint = `http://127.0.0.1:${await deadPort()}`;
  const c = new Client({ endpoints: [endpoint], timeout: 1000, clock: t.clock, sleep: t.sleep, random: () => 0.5 });
  try {
    await assert.rejects(c.next(), (e) => {
      assert.ok(e instanceof FlurryError);
      assert.equal(e.code, "UNAVAILABLE");
      assert.equal(e.httpStatus, 0);
      assert.equal(e.endpoint, endpoint);
      return true;
    });
    // 0.1, 0.2 and 0.4 s, each × 1.1; the next (0.88 s) would end after the deadline.
    assert.deepEqual(t.waits, [110, 220, 440]);
  } finally {
    c.close();
  }
});

test("two dead endpoints: both are tried in each round before a wait", async () => {
  const t = fakeTime();
  const endpoints = [`http://127.0.0.1:${await deadPort()}`, `http://127.0.0.1:${await deadPort()}`];
  const c = new Client({ endpoints, timeout: 400, clock: t.clock, sleep: t.sleep, random: () => 0 });
  try {
    await assert.rejects(c.decode("1"), (e) => e.code === "UNAVAILABLE" && e.endpoint === endpoints[1]);
    assert.deepEqual(t.waits, [100, 200]);
  } finally {
    c.close();
  }
});
