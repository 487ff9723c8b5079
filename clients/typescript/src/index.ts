// @flurry/client: the flurry client for Node 18+ (docs/clients.md is the contract it follows).

import { Answer, ConnectionFailure, Transport } from "./http.js";
import {
  BatchSizer,
  Decoded,
  DecodedOrder,
  FlurryError,
  FlurrySettingsError,
  Layout,
  classifyAnswer,
  decodeId,
  decodedOrder,
  leaderBase,
  parseTso,
  readOrderAnswer,
  retryWait,
} from "./internal.js";

export { FlurryError, FlurrySettingsError } from "./internal.js";
export type { Decoded, DecodedOrder, Layout, LayoutField } from "./internal.js";

/** Settings of a Client. Durations are milliseconds. */
export interface ClientOptions {
  /** One or more `http://HOST:PORT` (or `https://`) base URLs of flurry servers. Required. */
  endpoints: string[] | string;
  /** A bearer token sent on every request. */
  token?: string;
  /** An ID fetched longer ago than this is discarded, never handed out. Default 1000 ms. */
  maxAge?: number;
  /** The first and smallest refill. Default 256. */
  minBatch?: number;
  /** The largest refill (never more than the server's max_batch). Default 16384. */
  maxBatch?: number;
  /** A refill starts when fewer than lowWater × batch fresh IDs are left; in (0, 1). Default 0.5. */
  lowWater?: number;
  /** The deadline of one call, retries included. Default 5000 ms. */
  timeout?: number;
  /** Numbers per segment range request. Default 1000. */
  segmentRange?: number;
  /** Share of a segment range used before the next one is fetched; in (0, 1). Default 0.1. */
  segmentPrefetch?: number;
  /** Tests only: a monotonic clock in milliseconds (default performance.now). */
  clock?: () => number;
  /** Tests only: sleeps between retry rounds (default setTimeout). */
  sleep?: (ms: number) => Promise<void>;
  /** Tests only: the jitter source, uniform in [0, 1) (default Math.random). */
  random?: () => number;
}

/** Per-call options. */
export interface CallOptions {
  /** Overrides the client's timeout for this call (ms). */
  timeout?: number;
  /** Aborts the call (it then fails with code CANCELLED). */
  signal?: AbortSignal;
}

/** Options of decodeOrder. */
export interface DecodeOrderOptions extends CallOptions {
  /** The segment tag the number was made from (`?tag=`). */
  tag?: string;
  /** A token for this call (scope orders:decode); default the client's token. */
  token?: string;
}

interface Batch {
  ids: string[];
  pos: number;
  /** When the request that brought it was sent, on the client's clock. */
  sentAt: number;
}

interface Sent {
  answer: Answer;
  sentAt: number;
  endpoint: string;
}

/** One tso() caller, queued until a request takes it. */
interface TsoWaiter {
  taken: boolean;
  ok(value: bigint): void;
  fail(error: FlurryError): void;
}

/** Redirects one tso() request follows before it gives up with the last answer's error. */
const TSO_MAX_REDIRECTS = 4;


function setting(name: string, why: string): FlurrySettingsError {
  return new FlurrySettingsError(name, why);
}

function positiveDuration(name: string, value: number | undefined, fallback: number): number {
  if (value === undefined) return fallback;
  if (typeof value !== "number" || !Number.isFinite(value) || value <= 0) {
    throw setting(name, `must be a positive number of milliseconds, not ${String(value)}`);
  }
  return value;
}

function positiveInteger(name: string, value: number | undefined, fallback: number): number {
  if (value === undefined) return fallback;
  if (!Number.isSafeInteger(value) || value < 1) throw setting(name, `must be a whole number >= 1, not ${String(value)}`);
  return value;
}

function share(name: string, value: number | undefined, fallback: number): number {
  if (value === undefined) return fallback;
  if (typeof value !== "number" || !(value > 0 && value < 1)) throw setting(name, `must lie in (0, 1), not ${String(value)}`);
  return value;
}

const defaultSleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

/**
 * A flurry client: snowflake IDs from a prefetch buffer, segment numbers, decode.
 *
 * Safe for any number of concurrent async callers in one process (JavaScript runs them on one
 * thread; the buffer has one refill in flight at most). Every async method rejects with a
 * FlurryError only. Call close() when done, or the keep-alive connections hold the process.
 */
export class Client {
  /** The settings in force, defaults filled in. */
  readonly endpoints: readonly string[];
  readonly maxAge: number;
  readonly minBatch: number;
  readonly maxBatch: number;
  readonly lowWater: number;
  readonly timeout: number;
  readonly segmentRange: number;
  readonly segmentPrefetch: number;

  private readonly urls: URL[];
  private readonly headers: Record<string, string>;
  private readonly token: string | undefined;
  private readonly clock: () => number;
  private readonly sleep: (ms: number) => Promise<void>;
  private readonly random: () => number;
  private readonly transport = new Transport();
  private preferred = 0;
  private closed = false;
  /** The waits between retry rounds in progress; close() ends them (and their timers). */
  private readonly pauses = new Set<() => void>();

  private layoutPromise: Promise<Layout> | undefined;
  private sizer: BatchSizer | undefined;
  private readonly batches: Batch[] = [];
  /** IDs left in the buffer (fresh or not yet checked). */
  private buffered = 0;
  /** A refill starts when `buffered` falls below this. */
  private lowMark = 0;
  private expiredSinceRefill = false;
  private refilling: Promise<void> | undefined;
  private readonly segments = new Map<string, Segment>();
  /** tso(): callers not yet in a request, whether one is being sent, the leader last seen. */
  private tsoQueue: TsoWaiter[] = [];
  private tsoBusy = false;
  private tsoLeader: string | undefined;

  /** Validates the settings (a FlurrySettingsError, a RangeError, naming the setting); sends nothing. */
  constructor(options: ClientOptions) {
    if (options === null || typeof options !== "object") throw setting("endpoints", "required");
    const list = typeof options.endpoints === "string" ? [options.endpoints] : options.endpoints;
    if (!Array.isArray(list) || list.length === 0) throw setting("endpoints", "needs at least one URL");
    this.urls = list.map((e) => {
      let u: URL;
      try {
        u = new URL(String(e));
      } catch {
        throw setting("endpoints", `${JSON.stringify(e)} is not a URL`);
      }
      if (u.protocol !== "http:" && u.protocol !== "https:") {
        throw setting("endpoints", `${JSON.stringify(e)} is not an http:// or https:// URL`);
      }
      return u;
    });
    this.endpoints = this.urls.map((u) => u.origin + u.pathname.replace(/\/+$/, ""));
    this.maxAge = positiveDuration("maxAge", options.maxAge, 1000);
    this.timeout = positiveDuration("timeout", options.timeout, 5000);
    this.minBatch = positiveInteger("minBatch", options.minBatch, 256);
    this.maxBatch = positiveInteger("maxBatch", options.maxBatch, 16384);
    if (this.minBatch > this.maxBatch) throw setting("minBatch", `${this.minBatch} is more than maxBatch ${this.maxBatch}`);
    this.lowWater = share("lowWater", options.lowWater, 0.5);
    this.segmentRange = positiveInteger("segmentRange", options.segmentRange, 1000);
    this.segmentPrefetch = share("segmentPrefetch", options.segmentPrefetch, 0.1);
    if (options.token !== undefined && (typeof options.token !== "string" || options.token === "" || /[\r\n]/.test(options.token))) {
      throw setting("token", "must be a non-empty string on one line");
    }
    this.token = options.token;
    this.headers = this.token ? { authorization: `Bearer ${this.token}` } : {};
    const perf = globalThis.performance;
    this.clock = options.clock ?? (() => perf.now());
    this.sleep = options.sleep ?? defaultSleep;
    this.random = options.random ?? Math.random;
  }

  /**
   * One ID from the buffer if it holds a fresh one, else undefined (and a refill starts). Never
   * waits, never throws for the server: the synchronous fast path of next().
   */
  tryNext(): string | undefined {
    const id = this.take();
    if (id === undefined && this.refilling === undefined && !this.closed) this.startRefill(undefined);
    return id;
  }

  /** One fresh ID from the buffer, or undefined; starts a refill at low water, not when empty. */
  private take(): string | undefined {
    for (;;) {
      const b = this.batches[0];
      if (b === undefined) return undefined;
      if (this.clock() - b.sentAt > this.maxAge) {
        this.dropStale();
        continue;
      }
      const id = b.ids[b.pos++];
      if (b.pos === b.ids.length) this.batches.shift();
      if (--this.buffered < this.lowMark && this.refilling === undefined) this.startRefill(undefined);
      return id;
    }
  }

  /** The next ID, in decimal. Waits for a refill (up to the timeout) only when the buffer is empty. */
  next(options?: CallOptions): Promise<string>;
  /** `n` increasing IDs (1 <= n <= the server's max_batch): from the buffer, or one request of their own. */
  next(n: number, options?: CallOptions): Promise<string[]>;
  next(a?: number | CallOptions, b?: CallOptions): Promise<string | string[]> {
    if (typeof a === "number") return this.nextMany(a, b);
    const id = this.take();
    if (id !== undefined) return Promise.resolve(id);
    return this.nextSlow(a);
  }

  /** next() as a bigint. */
  nextBigInt(options?: CallOptions): Promise<bigint>;
  /** next(n) as bigints. */
  nextBigInt(n: number, options?: CallOptions): Promise<bigint[]>;
  async nextBigInt(a?: number | CallOptions, b?: CallOptions): Promise<bigint | bigint[]> {
    if (typeof a === "number") return (await this.nextMany(a, b)).map((s) => BigInt(s));
    return BigInt(await this.next(a));
  }

  /**
   * A timestamp from the cluster's timestamp oracle (GET /v1/tso), in decimal: strictly greater
   * than every timestamp any client got before this call began. Concurrent callers share one
   * request in flight; a caller that arrives while one is in flight waits for the next, which
   * carries every caller waiting then (at most maxBatch). Nothing is prefetched or kept between
   * calls. A follower's 307 is followed to the leader, asked directly until it fails (a
   * connection error, 502, 503 or 504). NOT_FOUND with reason TSO_OFF when the server does not
   * serve the oracle.
   */
  tso(options?: CallOptions): Promise<string> {
    return this.tsoBigInt(options).then((v) => v.toString());
  }

  /** tso() as a bigint. */
  tsoBigInt(options?: CallOptions): Promise<bigint> {
    if (this.closed) return Promise.reject(closedError());
    const deadline = this.deadline(options);
    const signal = options?.signal;
    return new Promise<bigint>((resolve, reject) => {
      let settled = false;
      const settle = () => {
        settled = true;
        clearTimeout(timer);
        signal?.removeEventListener("abort", onAbort);
      };
      const w: TsoWaiter = {
        taken: false,
        ok: (v) => {
          if (settled) return;
          settle();
          resolve(v);
        },
        fail: (e) => {
          if (settled) return;
          settle();
          // Not yet in a request: leave the queue (a value granted later would be skipped).
          if (!w.taken) this.tsoQueue = this.tsoQueue.filter((q) => q !== w);
          reject(e);
        },
      };
      const onAbort = () => w.fail(new FlurryError("CANCELLED", "the call was aborted"));
      const timer = setTimeout(
        () => w.fail(new FlurryError("DEADLINE_EXCEEDED", "no timestamp within the timeout: the tso request in flight has not answered")),
        Math.max(0, deadline - this.clock()),
      );
      if (signal?.aborted) return onAbort();
      signal?.addEventListener("abort", onAbort, { once: true });
      this.tsoQueue.push(w);
      if (!this.tsoBusy) {
        this.tsoBusy = true;
        // After this turn of the event loop: the callers of this turn called before the
        // request is sent, so they go in it.
        queueMicrotask(() => void this.tsoRun());
      }
    });
  }

  /** Sends the queued callers' requests, one at a time, until none is queued. */
  private async tsoRun(): Promise<void> {
    try {
      while (this.tsoQueue.length > 0 && !this.closed) {
        const batch = this.tsoQueue.splice(0, this.maxBatch);
        for (const w of batch) w.taken = true;
        try {
          const first = await this.tsoFetch(batch.length, this.clock() + this.timeout);
          batch.forEach((w, k) => w.ok(first + BigInt(k)));
        } catch (e) {
          const err = e instanceof FlurryError ? e : new FlurryError("INTERNAL", `tso request failed: ${String(e)}`);
          for (const w of batch) w.fail(err);
        }
      }
    } finally {
      this.tsoBusy = false;
    }
  }

  /**
   * GET /v1/tso?count=`count` to the leader last seen, else to the endpoints; follows 307s. A
   * leader that failed in this call is asked again only after the wait between retry rounds (the
   * other servers may redirect to it until its lease has run out), until the deadline.
   */
  private async tsoFetch(count: number, deadline: number): Promise<bigint> {
    const path = `/v1/tso?count=${count}`;
    let last: FlurryError | undefined;
    const failed = new Map<string, FlurryError>(); // leaders that failed in this call
    let hops = 0;
    let rounds = 0;
    for (;;) {
      let leader = this.tsoLeader;
      if (leader === undefined) {
        const sent = await this.call(path, deadline, undefined, this.headers, true);
        if (sent.answer.status !== 307) return parseTso(sent.answer.body, count, sent.endpoint, sent.answer.status);
        last = classifyAnswer(307, sent.answer.retryAfter, sent.answer.body, sent.endpoint).error;
        leader = leaderBase(sent.answer.location);
        if (leader === undefined) throw last; // a redirect to nowhere we can go
        const failure = failed.get(leader);
        if (failure !== undefined) {
          const wait = retryWait(rounds++, undefined, this.random()) * 1000;
          if (this.clock() + wait > deadline) throw failure;
          await this.pause(wait);
          if (this.closed) throw closedError();
        } else if (++hops > TSO_MAX_REDIRECTS) {
          throw last;
        }
        this.tsoLeader = leader;
        continue;
      }
      const remaining = deadline - this.clock();
      if (remaining <= 0) throw deadlineError(last);
      let answer: Answer;
      try {
        answer = await this.transport.get(new URL(leader + path), this.headers, remaining);
      } catch (e) {
        if (this.closed) throw closedError();
        if (e instanceof ConnectionFailure && e.timedOut) throw deadlineError(last);
        last = classifyAnswer(0, undefined, undefined, leader, (e as Error).message).error;
        failed.set(leader, last);
        this.tsoLeader = undefined; // back to the endpoints
        continue;
      }
      if (this.closed) throw closedError();
      if (answer.status >= 200 && answer.status < 300) return parseTso(answer.body, count, leader, answer.status);
      last = classifyAnswer(answer.status, answer.retryAfter, answer.body, leader).error;
      if (answer.status === 307 && answer.location) {
        if (++hops > TSO_MAX_REDIRECTS) throw last;
        this.tsoLeader = leaderBase(answer.location);
        if (this.tsoLeader === undefined) throw last;
      } else if (answer.status === 502 || answer.status === 503 || answer.status === 504) {
        failed.set(leader, last);
        this.tsoLeader = undefined;
      } else {
        throw last;
      }
    }
  }

  /** The handle of segment tag `tag` (the same object for the same tag). */
  segment(tag: string): Segment {
    let s = this.segments.get(tag);
    if (s === undefined) {
      if (typeof tag !== "string" || tag === "") throw new FlurryError("INVALID_ARGUMENT", "a segment tag must be a non-empty string");
      s = new Segment(this, tag);
      this.segments.set(tag, s);
    }
    return s;
  }

  /** Decodes an ID locally by the server's layout (read once from GET /v1/layout). */
  async decode(id: string | bigint, options?: CallOptions): Promise<Decoded> {
    if (this.closed) throw closedError();
    const layout = await this.loadLayout(this.deadline(options), options?.signal);
    return decodeId(layout, id);
  }

  /**
   * The server's decode of an order number (GET /v1/order-numbers/{code}, scope orders:decode):
   * a DecodedOrder, the snowflake variant with the ID's fields as decode() gives them, or (with
   * `tag`) the segment variant. A number that does not decode is the server's INVALID_ARGUMENT.
   */
  async decodeOrder(code: string, options?: DecodeOrderOptions): Promise<DecodedOrder> {
    if (this.closed) throw closedError();
    let path = `/v1/order-numbers/${encodeURIComponent(code)}`;
    if (options?.tag !== undefined) path += `?tag=${encodeURIComponent(options.tag)}`;
    const headers = options?.token ? { authorization: `Bearer ${options.token}` } : this.headers;
    const deadline = this.deadline(options);
    const sent = await this.call(path, deadline, options?.signal, headers);
    const answer = readOrderAnswer(sent.answer.body);
    const layout = answer.source === "snowflake" ? await this.loadLayout(deadline, options?.signal) : undefined;
    return decodedOrder(answer, layout, sent.answer.body);
  }

  /** The server's layout (GET /v1/layout, read once from the first endpoint that answers). */
  layout(options?: CallOptions): Promise<Layout> {
    return this.loadLayout(this.deadline(options), options?.signal);
  }

  private loadLayout(deadline: number, signal?: AbortSignal): Promise<Layout> {
    if (this.layoutPromise === undefined) {
      const p = this.call("/v1/layout", deadline, signal).then((sent) => this.json(sent) as Layout);
      p.catch(() => {
        if (this.layoutPromise === p) this.layoutPromise = undefined;
      });
      this.layoutPromise = p;
    }
    return this.layoutPromise;
  }

  /**
   * Drops the buffer and the segment ranges, and closes the connections, those in use too. Later
   * calls, and calls waiting now, fail with code CANCELLED ("the client is closed"). Idempotent.
   */
  close(): void {
    this.closed = true;
    for (const wake of [...this.pauses]) wake();
    this.batches.length = 0;
    this.buffered = 0;
    for (const s of this.segments.values()) s["drop"]();
    for (const w of [...this.tsoQueue]) w.fail(closedError());
    this.transport.close();
  }

  /** @internal Whether close() ran. */
  isClosed(): boolean {
    return this.closed;
  }

  // ---- internals ----

  private deadline(options?: CallOptions): number {
    const t = options?.timeout === undefined ? this.timeout : positiveDuration("timeout", options.timeout, this.timeout);
    return this.clock() + t;
  }

  private dropStale(): void {
    const now = this.clock();
    while (this.batches.length > 0 && now - this.batches[0].sentAt > this.maxAge) {
      const b = this.batches.shift()!;
      this.buffered -= b.ids.length - b.pos;
      this.expiredSinceRefill = true;
    }
  }

  private async nextSlow(options?: CallOptions): Promise<string> {
    const deadline = this.deadline(options);
    for (;;) {
      if (this.closed) throw closedError();
      if (this.refilling === undefined) this.startRefill(deadline);
      await this.waitFor(this.refilling!, deadline, options?.signal);
      const id = this.take();
      if (id !== undefined) return id;
    }
  }

  private async nextMany(n: number, options?: CallOptions): Promise<string[]> {
    if (!Number.isSafeInteger(n) || n < 1) throw new FlurryError("INVALID_ARGUMENT", `count ${n}: must be a whole number >= 1`);
    if (this.closed) throw closedError();
    const deadline = this.deadline(options);
    const layout = await this.loadLayout(deadline, options?.signal);
    if (n > layout.max_batch) throw new FlurryError("INVALID_ARGUMENT", `count ${n}: more than the server's max_batch ${layout.max_batch}`);
    this.dropStale();
    if (this.buffered >= n) {
      const out: string[] = [];
      let batchesUsed = 0;
      while (out.length < n) {
        const b = this.batches[0];
        const take = Math.min(n - out.length, b.ids.length - b.pos);
        for (let i = 0; i < take; i++) out.push(b.ids[b.pos + i]);
        b.pos += take;
        batchesUsed++;
        if (b.pos === b.ids.length) this.batches.shift();
      }
      this.buffered -= n;
      if (this.buffered < this.lowMark && this.refilling === undefined) this.startRefill(undefined);
      // Batches from different servers (after a failover) need not follow each other in order.
      if (batchesUsed > 1) out.sort((x, y) => (x.length - y.length) || (x < y ? -1 : x > y ? 1 : 0));
      return out;
    }
    return parseIds(await this.call(`/v1/ids?count=${n}&format=text`, deadline, options?.signal));
  }

  /** Starts the one refill; `deadline` is the waiting caller's, or now + timeout when none waits. */
  private startRefill(deadline: number | undefined): void {
    const p = (async () => {
      try {
        const d = deadline ?? this.clock() + this.timeout;
        const layout = await this.loadLayout(d);
        if (this.sizer === undefined) this.sizer = new BatchSizer(this.minBatch, this.maxBatch, layout.max_batch);
        const size = this.sizer.next(this.expiredSinceRefill);
        this.expiredSinceRefill = false;
        this.lowMark = this.lowWater * size;
        const sent = await this.call(`/v1/ids?count=${size}&format=text`, d, undefined);
        if (this.closed) return;
        const ids = parseIds(sent);
        if (ids.length > 0) {
          this.batches.push({ ids, pos: 0, sentAt: sent.sentAt });
          this.buffered += ids.length;
        }
      } finally {
        this.refilling = undefined;
      }
    })();
    // A refill nobody waits for fails quietly; the next next() starts another one.
    p.catch(() => {});
    this.refilling = p;
  }

  /** @internal Waits for `p` until `deadline` (DEADLINE_EXCEEDED) or `signal` (CANCELLED). */
  waitFor(p: Promise<void>, deadline: number, signal?: AbortSignal): Promise<void> {
    return new Promise<void>((resolve, reject) => {
      const done = () => {
        clearTimeout(timer);
        signal?.removeEventListener("abort", onAbort);
      };
      const onAbort = () => {
        done();
        reject(new FlurryError("CANCELLED", "the call was aborted"));
      };
      const timer = setTimeout(() => {
        done();
        reject(new FlurryError("DEADLINE_EXCEEDED", "the call's timeout ran out while waiting for a refill"));
      }, Math.max(0, deadline - this.clock()));
      if (signal?.aborted) return onAbort();
      signal?.addEventListener("abort", onAbort, { once: true });
      p.then(
        () => {
          done();
          resolve();
        },
        (e: unknown) => {
          done();
          reject(e);
        },
      );
    });
  }

  /**
   * @internal
   * One request with the contract's retries and failover: endpoints in turn from the one that
   * last answered; retry answers wait between rounds; failover answers drop that endpoint for
   * this call; fatal answers raise at once.
   */
  async call(
    path: string,
    deadline: number,
    signal?: AbortSignal,
    headers: Record<string, string> = this.headers,
    follow = false,
  ): Promise<Sent> {
    const n = this.urls.length;
    const out = new Set<number>();
    let last: FlurryError | undefined;
    for (let round = 0; ; round++) {
      let roundRetryAfter: number | undefined;
      const first = this.preferred;
      for (let k = 0; k < n; k++) {
        const i = (first + k) % n;
        if (out.has(i)) continue;
        if (this.closed) throw closedError();
        const remaining = deadline - this.clock();
        if (remaining <= 0) throw deadlineError(last);
        const endpoint = this.endpoints[i];
        const sentAt = this.clock();
        let answer: Answer;
        try {
          answer = await this.transport.get(new URL(endpoint + path), headers, remaining, signal);
        } catch (e) {
          if (this.closed) throw closedError();
          if (e instanceof ConnectionFailure && e.aborted) throw new FlurryError("CANCELLED", "the call was aborted", { endpoint });
          if (e instanceof ConnectionFailure && e.timedOut) throw deadlineError(last);
          last = classifyAnswer(0, undefined, undefined, endpoint, (e as Error).message).error;
          continue;
        }
        if (this.closed) throw closedError(); // what came back is dropped, never handed out
        if ((answer.status >= 200 && answer.status < 300) || (follow && answer.status === 307 && answer.location)) {
          this.preferred = i; // with follow, a 307 with a Location goes to the caller (tso())
          return { answer, sentAt, endpoint };
        }
        const c = classifyAnswer(answer.status, answer.retryAfter, answer.body, endpoint);
        last = c.error;
        if (c.action === "fatal") throw c.error;
        if (c.action === "failover") out.add(i);
        else roundRetryAfter = Math.max(roundRetryAfter ?? 0, c.error.retryAfter ?? 0);
      }
      if (out.size === n) throw last!;
      const wait = retryWait(round, roundRetryAfter, this.random()) * 1000;
      if (this.clock() + wait > deadline) throw last!;
      await this.pause(wait);
      if (this.closed) throw closedError();
      if (signal?.aborted) throw new FlurryError("CANCELLED", "the call was aborted");
    }
  }

  /** Waits `ms` (the sleep option's, or a timer) unless close() runs first. */
  private pause(ms: number): Promise<void> {
    return new Promise<void>((resolve) => {
      let timer: ReturnType<typeof setTimeout> | undefined;
      const wake = () => {
        if (timer !== undefined) clearTimeout(timer);
        this.pauses.delete(wake);
        resolve();
      };
      this.pauses.add(wake);
      if (this.sleep === defaultSleep) timer = setTimeout(wake, ms);
      else this.sleep(ms).then(wake, wake);
    });
  }

  private json(sent: Sent): unknown {
    try {
      return JSON.parse(sent.answer.body);
    } catch {
      throw new FlurryError("UNKNOWN", `${sent.endpoint}: the answer is not JSON: ${sent.answer.body.slice(0, 200)}`, {
        httpStatus: sent.answer.status,
        endpoint: sent.endpoint,
      });
    }
  }
}

/**
 * A segment tag's numbers, handed out from a range the client holds (a double buffer: the next
 * range is fetched in the background once segmentPrefetch of the current one is used). Safe for
 * concurrent async callers; numbers come out once each and in order.
 */
export class Segment {
  private current: Range | undefined;
  private following: Range | undefined;
  private fetching: Promise<void> | undefined;

  /** @internal use Client.segment(tag). */
  constructor(
    private readonly client: Client,
    readonly tag: string,
  ) {}

  /**
   * The tag's next number, in decimal. NOT_FOUND for an unknown tag, OUT_OF_RANGE for a too large
   * segmentRange, CANCELLED on a closed client.
   */
  next(options?: CallOptions): Promise<string> {
    if (this.client.isClosed()) return Promise.reject(closedError());
    const v = this.tryNext();
    if (v !== undefined) return Promise.resolve(v);
    return this.nextSlow(options);
  }

  /** next() as a bigint. */
  async nextBigInt(options?: CallOptions): Promise<bigint> {
    return BigInt(await this.next(options));
  }

  private tryNext(): string | undefined {
    let r = this.current;
    if (r === undefined || r.next >= r.end) {
      if (this.following === undefined) return undefined;
      r = this.current = this.following;
      this.following = undefined;
    }
    const v = r.next;
    r.next += r.delta;
    r.used++;
    if (this.following === undefined && this.fetching === undefined && r.used >= this.client.segmentPrefetch * r.size) {
      this.fetch(undefined);
    }
    return v.toString();
  }

  /** Drops the ranges held (close()): none of their numbers is handed out. */
  private drop(): void {
    this.current = undefined;
    this.following = undefined;
  }

  private async nextSlow(options?: CallOptions): Promise<string> {
    const c = this.client;
    const deadline = c["deadline"](options);
    for (;;) {
      if (c.isClosed()) throw closedError();
      if (this.fetching === undefined) this.fetch(deadline);
      await c.waitFor(this.fetching!, deadline, options?.signal);
      const v = this.tryNext();
      if (v !== undefined) return v;
    }
  }

  private fetch(deadline: number | undefined): void {
    const c = this.client;
    const p = (async () => {
      try {
        const path = `/v1/segments/${encodeURIComponent(this.tag)}/range?size=${c.segmentRange}`;
        const sent = await c.call(path, deadline ?? c["clock"]() + c.timeout);
        const body = c["json"](sent) as { start: string; end: string; delta: number | string };
        const start = BigInt(body.start);
        const end = BigInt(body.end);
        const delta = BigInt(body.delta);
        const r: Range = { next: start, end, delta, used: 0, size: Number((end - start + delta - 1n) / delta) };
        if (c.isClosed()) throw closedError();
        if (this.current === undefined || this.current.next >= this.current.end) this.current = r;
        else this.following = r;
      } finally {
        this.fetching = undefined;
      }
    })();
    p.catch(() => {});
    this.fetching = p;
  }
}

interface Range {
  next: bigint;
  end: bigint;
  delta: bigint;
  used: number;
  size: number;
}

function parseIds(sent: Sent): string[] {
  const ids = sent.answer.body.split("\n");
  if (ids.length > 0 && ids[ids.length - 1] === "") ids.pop();
  return ids;
}

function closedError(): FlurryError {
  return new FlurryError("CANCELLED", "the client is closed");
}

function deadlineError(last: FlurryError | undefined): FlurryError {
  if (last !== undefined && last.httpStatus > 0) return last;
  return new FlurryError("DEADLINE_EXCEEDED", "the call's timeout ran out before any server answered" + (last ? ` (last: ${last.message})` : ""));
}
