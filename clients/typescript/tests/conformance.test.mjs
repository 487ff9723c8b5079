// The conformance suite (clients/conformance/cases.json): pure functions of the library.
import { test } from "node:test";
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import {
  BatchSizer,
  classifyAnswer,
  decodeId,
  decodedOrder,
  leaderBase,
  parseTso,
  readOrderAnswer,
  retryWait,
} from "../dist/internal.js";

const casesPath =
  process.env.FLURRY_CONFORMANCE_CASES ??
  fileURLToPath(new URL("../../conformance/cases.json", import.meta.url));
const cases = JSON.parse(readFileSync(casesPath, "utf8"));

test("every decode vector decodes to the server's answer", () => {
  let n = 0;
  for (const l of cases.layouts) {
    for (const v of l.decode) {
      for (const id of [v.id, BigInt(v.id)]) {
        const d = decodeId(l.layout, id);
        const e = v.expect;
        const want = { time: e.time, unix_ms: e.unix_ms, ticks: e.ticks, node: e.node, seq: e.seq, fields: e.fields };
        const got = { time: d.time, unix_ms: d.unixMs, ticks: d.ticks, node: d.node, seq: d.seq, fields: d.fields };
        if ("clock" in e) want.clock = e.clock;
        if ("clock" in d) got.clock = d.clock;
        assert.deepEqual(got, want, `${l.name} ${v.id}`);
        assert.equal(d.id, BigInt(v.id).toString());
        n++;
      }
    }
  }
  assert.ok(n > 20);
});

test("order-number answers become a DecodedOrder of either variant; answers that do not fit are UNKNOWN", () => {
  const layouts = Object.fromEntries(cases.layouts.map((l) => [l.name, l.layout]));
  const sources = new Set();
  let bad = 0;
  for (const c of cases.order_decodes) {
    const layout = layouts[c.layout];
    const parse = () => {
      const a = readOrderAnswer(c.answer);
      return decodedOrder(a, a.source === "snowflake" ? layout : undefined, c.answer);
    };
    if (c.expect_error !== undefined) {
      assert.throws(parse, (e) => e.code === c.expect_error, c.name);
      bad++;
      continue;
    }
    const o = parse();
    const x = c.expect;
    const want = { source: x.source, orderNumber: x.order_number, keyVersion: x.key_version, id: x.id };
    if (x.tag !== null) want.tag = x.tag;
    if (x.decoded !== null) {
      const d = decodeId(layout, x.id);
      want.decoded = d;
      const e = x.decoded;
      const got = { time: d.time, unix_ms: d.unixMs, ticks: d.ticks, node: d.node, seq: d.seq, fields: d.fields };
      assert.deepEqual(got, { time: e.time, unix_ms: e.unix_ms, ticks: e.ticks, node: e.node, seq: e.seq, fields: e.fields }, c.name);
    }
    assert.deepEqual(o, want, c.name);
    sources.add(o.source);
  }
  assert.deepEqual([...sources].sort(), ["segment", "snowflake"]);
  assert.ok(bad >= 10);
});

test("every decode_errors text is refused with INVALID_ARGUMENT", () => {
  for (const l of cases.layouts) {
    for (const text of l.decode_errors) {
      assert.throws(() => decodeId(l.layout, text), (e) => e.code === "INVALID_ARGUMENT", `${l.name} ${text}`);
    }
  }
});

test("every error answer becomes the expected error and action", () => {
  for (const c of cases.errors) {
    const { error, action } = classifyAnswer(c.status, c.retry_after_header, c.body, "http://e:1");
    const e = c.expect;
    assert.equal(action, e.action, c.name);
    assert.equal(error.code, e.code, c.name);
    assert.equal(error.reason, e.reason, c.name);
    assert.equal(error.retryAfter, e.retry_after ?? undefined, c.name);
    assert.equal(error.httpStatus, c.status, c.name);
    assert.equal(error.endpoint, "http://e:1", c.name);
    if ("message" in e) assert.equal(error.message, e.message, c.name);
    if ("message_prefix" in e) assert.ok(error.message.startsWith(e.message_prefix), c.name);
  }
});

test("every retry wait", () => {
  for (const c of cases.retry_waits) {
    const w = retryWait(c.round, c.retry_after ?? undefined, c.u);
    assert.ok(Math.abs(w - c.wait) < 1e-9, `${JSON.stringify(c)} gave ${w}`);
  }
});

test("every tso answer and 307 Location", () => {
  for (const c of cases.tso.grants) {
    if (c.expect.first !== undefined) {
      assert.equal(parseTso(c.body, c.count, "e", 200), BigInt(c.expect.first), c.name);
    } else {
      assert.throws(() => parseTso(c.body, c.count, "e", 200), (e) => e.code === c.expect.code, c.name);
    }
  }
  for (const c of cases.tso.leaders) assert.equal(leaderBase(c.location) ?? null, c.leader, c.location);
});

test("every batch size sequence", () => {
  for (const c of cases.batch_sizes) {
    const s = new BatchSizer(c.min_batch, c.max_batch, c.server_max_batch);
    const got = c.events.map((ev) => s.next(ev === "expired"));
    assert.deepEqual(got, c.expect, JSON.stringify(c));
  }
});
