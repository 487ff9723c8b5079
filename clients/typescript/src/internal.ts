// The pure parts of the contract (docs/clients.md): error answers, retry waits, batch sizes and
// decode. No I/O here, so the conformance suite (clients/conformance/cases.json) tests them
// directly.

/** What a client does with an answer: done, try again later, skip this endpoint, or raise. */
export type Action = "retry" | "failover" | "fatal";

/**
 * A failed call. `code` is the server's canonical code (`UNAVAILABLE` for a connection error,
 * `DEADLINE_EXCEEDED` when the call's timeout ran out before any server answered), `reason` the
 * server's reason ("" when none), `httpStatus` 0 when no HTTP answer came, `retryAfter` the
 * answer's `Retry-After` in seconds (undefined when absent), `endpoint` the base URL that failed
 * ("" for errors of the client itself, such as settings).
 */
export class FlurryError extends Error {
  readonly code: string;
  readonly reason: string;
  readonly httpStatus: number;
  readonly retryAfter: number | undefined;
  readonly endpoint: string;

  constructor(
    code: string,
    message: string,
    opts: { reason?: string; httpStatus?: number; retryAfter?: number; endpoint?: string } = {},
  ) {
    super(message);
    this.name = "FlurryError";
    this.code = code;
    this.reason = opts.reason ?? "";
    this.httpStatus = opts.httpStatus ?? 0;
    this.retryAfter = opts.retryAfter;
    this.endpoint = opts.endpoint ?? "";
  }
}

/**
 * A bad setting given to `new Client(...)`: a `RangeError` (a programming error, never retried),
 * with the code the other errors carry (`INVALID_ARGUMENT`) and the setting's name; the message
 * starts with the name and a colon (`minBatch: 600 is more than maxBatch 500`).
 */
export class FlurrySettingsError extends RangeError {
  readonly code = "INVALID_ARGUMENT";
  readonly setting: string;

  constructor(setting: string, why: string) {
    super(`${setting}: ${why}`);
    this.name = "FlurrySettingsError";
    this.setting = setting;
  }
}

/** `Retry-After` in seconds: delta-seconds as given; any other value counts as 1 s. */
export function parseRetryAfter(header: string | null | undefined): number | undefined {
  if (header === null || header === undefined) return undefined;
  const text = header.trim();
  return /^[0-9]+$/.test(text) ? Number(text) : 1;
}

/**
 * Turns a non-2xx answer (status 0: no HTTP answer, a connection error) into the error it is and
 * what to do about it, by the contract's table.
 */
export function classifyAnswer(
  status: number,
  retryAfterHeader: string | null | undefined,
  body: string | null | undefined,
  endpoint: string,
  connectionMessage = "connection failed",
): { error: FlurryError; action: Action } {
  if (status === 0) {
    return {
      error: new FlurryError("UNAVAILABLE", `${endpoint}: ${connectionMessage}`, { endpoint }),
      action: "retry",
    };
  }
  const retryAfter = parseRetryAfter(retryAfterHeader);
  let code: string | undefined;
  let reason = "";
  let message = "";
  try {
    const parsed: unknown = JSON.parse(body ?? "");
    const err = (parsed as { error?: unknown } | null)?.error as Record<string, unknown> | undefined;
    if (err && typeof err === "object" && typeof err.code === "string") {
      code = err.code;
      reason = typeof err.reason === "string" ? err.reason : "";
      message = typeof err.message === "string" ? err.message : "";
    }
  } catch {
    // Not JSON: not flurry's error; the status decides below.
  }
  if (code === undefined) {
    code = status === 502 || status === 503 || status === 504 ? "UNAVAILABLE" : "UNKNOWN";
    message = `HTTP ${status}: ${(body ?? "").slice(0, 200)}`;
  }
  let action: Action = "fatal";
  if (status === 502 || status === 503 || status === 504) {
    action = retryAfter === undefined ? "failover" : "retry";
  }
  return { error: new FlurryError(code, message, { reason, httpStatus: status, retryAfter, endpoint }), action };
}

/** Seconds to wait after failed round `round` (0-based); `u` uniform in [0, 1). */
export function retryWait(round: number, retryAfter: number | undefined, u: number): number {
  const backoff = Math.min(0.1 * 2 ** Math.min(round, 64), 5.0);
  return Math.max(retryAfter ?? 0, backoff) * (1 + 0.2 * u);
}

/**
 * The adaptive refill size: the first refill asks for `lo`; later ones halve when IDs expired
 * since the previous refill, else double (the buffer ran low), within [lo, hi], where
 * hi = min(maxBatch, server's max_batch) and lo = min(minBatch, hi).
 */
export class BatchSizer {
  readonly lo: number;
  readonly hi: number;
  private size = 0;

  constructor(minBatch: number, maxBatch: number, serverMaxBatch: number) {
    this.hi = Math.min(maxBatch, serverMaxBatch);
    this.lo = Math.min(minBatch, this.hi);
  }

  /** The size the current refill asks for (0 before the first). */
  get current(): number {
    return this.size;
  }

  /** The size of the next refill, given whether IDs expired since the previous one. */
  next(expired: boolean): number {
    if (this.size === 0) this.size = this.lo;
    else if (expired) this.size = Math.max(Math.floor(this.size / 2), this.lo);
    else this.size = Math.min(this.size * 2, this.hi);
    return this.size;
  }
}

/** A field of a layout, as `/v1/layout` gives it. */
export interface LayoutField {
  name: string;
  bits: number;
  shift: number;
  kind: string;
}

/** The parts of `/v1/layout` a client reads. */
export interface Layout {
  text: string;
  bits: number;
  fields: LayoutField[];
  epoch_unix_ms: number;
  unit_ns: number;
  max_batch: number;
  [key: string]: unknown;
}

/**
 * An ID decoded locally, with the server's results. Field values are `number`s: layouts keep
 * every field well below 2^53 (the time field, the largest, has at most 41..48 bits in practice);
 * a field wider than 53 bits is refused rather than rounded.
 */
export interface Decoded {
  /** The ID, in decimal. */
  id: string;
  /** ISO-8601 UTC with milliseconds, e.g. `2026-11-26T16:58:55.972Z`. */
  time: string;
  /** The time in whole milliseconds since the Unix epoch, rounded down. */
  unixMs: number;
  /** The raw time field. */
  ticks: number;
  /** The node fields together, the first one most significant. */
  node: number;
  seq: number;
  /** Present only when the layout has a clock field. */
  clock?: number;
  /** Every field by name, in the layout's order. */
  fields: { name: string; value: number }[];
}

const MAX_U64 = (1n << 64n) - 1n;
const MAX_NS = (1n << 63n) - 1n;

/** Parses an ID given as text (plain decimal digits, below 2^64) or bigint; INVALID_ARGUMENT else. */
export function parseId(id: string | bigint): bigint {
  let value: bigint;
  if (typeof id === "bigint") {
    value = id;
  } else if (typeof id === "string" && /^[0-9]+$/.test(id)) {
    value = BigInt(id);
  } else {
    throw new FlurryError("INVALID_ARGUMENT", `ID ${JSON.stringify(String(id))}: not a decimal number`);
  }
  if (value < 0n || value > MAX_U64) {
    throw new FlurryError("INVALID_ARGUMENT", `ID ${String(id)}: not an unsigned 64-bit number`);
  }
  return value;
}

/** Decodes `id` by `layout` exactly as the server does (GET /v1/ids/{id}). */
export function decodeId(layout: Layout, id: string | bigint): Decoded {
  const value = parseId(id);
  if (value >> BigInt(layout.bits) !== 0n) {
    throw new FlurryError("INVALID_ARGUMENT", `ID ${value}: has bits set at or above the layout's ${layout.bits} bits`);
  }
  const fields: { name: string; value: number }[] = [];
  let ticks = 0n;
  let node = 0n;
  let seq = 0n;
  let clock: bigint | undefined;
  for (const f of layout.fields) {
    if (f.bits > 53) throw new FlurryError("INVALID_ARGUMENT", `field ${f.name} is wider than 53 bits`);
    const v = (value >> BigInt(f.shift)) & ((1n << BigInt(f.bits)) - 1n);
    fields.push({ name: f.name, value: Number(v) });
    if (f.kind === "time") ticks = v;
    else if (f.kind === "node") node = (node << BigInt(f.bits)) | v;
    else if (f.kind === "seq") seq = v;
    else if (f.kind === "clock") clock = v;
  }
  let ns = BigInt(layout.epoch_unix_ms) * 1_000_000n + ticks * BigInt(layout.unit_ns);
  if (ns > MAX_NS) ns = MAX_NS;
  const unixMs = Number(ns / 1_000_000n);
  const out: Decoded = {
    id: value.toString(),
    time: new Date(unixMs).toISOString(),
    unixMs,
    ticks: Number(ticks),
    node: Number(node),
    seq: Number(seq),
    fields,
  };
  if (clock !== undefined) out.clock = Number(clock);
  return out;
}

/** The fields both variants of a DecodedOrder share. */
interface DecodedOrderBase {
  /** The order number as the server read it. */
  orderNumber: string;
  /** The version of the key that decodes it ("1"). */
  keyVersion: string;
  /** The snowflake ID, or the tag's number, in decimal. */
  id: string;
}

/**
 * The server's decode of an order number (GET /v1/order-numbers/{code}; docs/clients.md, "Order
 * numbers"), discriminated by `source`: a snowflake ID with its fields (`decoded`, as
 * `Client.decode(id)` gives them), or a segment tag's number with its `tag`.
 */
export type DecodedOrder =
  | (DecodedOrderBase & { source: "snowflake"; decoded: Decoded })
  | (DecodedOrderBase & { source: "segment"; tag: string });

/** An order-number answer whose fields were checked; `decoded` is yet to be filled. */
export type OrderAnswer = DecodedOrderBase & ({ source: "snowflake" } | { source: "segment"; tag: string });

function badOrderAnswer(why: string, body: string): FlurryError {
  return new FlurryError("UNKNOWN", `an order-number answer ${why}: ${JSON.stringify(body.slice(0, 200))}`);
}

/** Checks a GET /v1/order-numbers/{code} answer (FlurryError UNKNOWN quoting one that does not fit). */
export function readOrderAnswer(body: string): OrderAnswer {
  let j: unknown;
  try {
    j = JSON.parse(body);
  } catch {
    throw badOrderAnswer("that is not JSON", body);
  }
  if (j === null || typeof j !== "object" || Array.isArray(j)) throw badOrderAnswer("that is not a JSON object", body);
  const o = j as Record<string, unknown>;
  for (const key of ["order_number", "key_version", "source", "id"]) {
    if (typeof o[key] !== "string") throw badOrderAnswer(`without "${key}" as text`, body);
  }
  const id = o.id as string;
  if (!/^[0-9]+$/.test(id) || BigInt(id) > MAX_U64) throw badOrderAnswer("whose id is not a decimal number below 2^64", body);
  const base = { orderNumber: o.order_number as string, keyVersion: o.key_version as string, id: BigInt(id).toString() };
  if (o.source === "segment") {
    if (typeof o.tag !== "string" || o.tag === "") throw badOrderAnswer("of a segment number without its tag", body);
    return { ...base, source: "segment", tag: o.tag };
  }
  if (o.source !== "snowflake") throw badOrderAnswer("whose source is neither snowflake nor segment", body);
  return { ...base, source: "snowflake" };
}

/** The DecodedOrder of a checked answer; `layout` decodes a snowflake number's ID (unused for a segment number). */
export function decodedOrder(a: OrderAnswer, layout: Layout | undefined, body: string): DecodedOrder {
  if (a.source === "segment") return { source: "segment", orderNumber: a.orderNumber, keyVersion: a.keyVersion, id: a.id, tag: a.tag };
  let decoded: Decoded;
  try {
    decoded = decodeId(layout!, a.id);
  } catch (e) {
    throw badOrderAnswer(`whose id the layout cannot have made (${(e as Error).message})`, body);
  }
  return { source: "snowflake", orderNumber: a.orderNumber, keyVersion: a.keyVersion, id: a.id, decoded };
}

/** The scheme://host:port of a 307's Location; undefined unless an absolute http(s) URL. */
export function leaderBase(location: string | undefined): string | undefined {
  if (location === undefined) return undefined;
  try {
    const u = new URL(location);
    return u.protocol === "http:" || u.protocol === "https:" ? u.origin : undefined;
  } catch {
    return undefined;
  }
}

/**
 * The first timestamp of a GET /v1/tso answer ({"first":"<decimal>","count":N}); UNKNOWN quoting
 * an answer that does not fit a request for `count`.
 */
export function parseTso(body: string, count: number, endpoint: string, httpStatus: number): bigint {
  try {
    const j = JSON.parse(body) as { first?: unknown; count?: unknown };
    if (typeof j.first === "string" && /^[0-9]{1,20}$/.test(j.first) && j.count === count) {
      const first = BigInt(j.first);
      if (first + BigInt(count) <= 1n << 64n) return first;
    }
  } catch {
    // quoted below
  }
  throw new FlurryError("UNKNOWN", `a tso answer that does not fit a request for ${count}: ${body.slice(0, 200)}`, {
    httpStatus,
    endpoint,
  });
}
