// The client's benchmark (not a test): node dist/bench.js [--duration S] [--try-next]
// FLURRY_BENCH_SERVER is one base URL (the server itself, no proxy). Prints one JSON line per run:
// buffer/1, buffer/8 (default settings, await next() in a loop per caller), per_request/1,
// per_request/8 (each caller its own keep-alive connection, GET /v1/ids?count=1 per ID); with
// --try-next one more line, bench "buffer_try_next", for the synchronous tryNext() loop.

import { Transport } from "./http.js";
import { Client } from "./index.js";

const server = process.env.FLURRY_BENCH_SERVER?.replace(/\/+$/, "");
if (!server) {
  console.error("bench: set FLURRY_BENCH_SERVER to the server's base URL (http://HOST:PORT)");
  process.exit(2);
}
const args = process.argv.slice(2);
let duration = 3;
const at = args.indexOf("--duration");
if (at >= 0) {
  duration = Number(args[at + 1]);
  if (!(duration > 0)) {
    console.error("bench: --duration needs a positive number of seconds");
    process.exit(2);
  }
}
const withTryNext = args.includes("--try-next");

const metricsTransport = new Transport(1);

/** flurry_http_requests_total{route="/v1/ids"} over all codes. */
async function idRequests(): Promise<number> {
  const a = await metricsTransport.get(new URL(server + "/metrics"), {}, 10_000);
  let sum = 0;
  for (const line of a.body.split("\n")) {
    const m = /^flurry_http_requests_total\{route="\/v1\/ids",code="\d+"\} (\d+)/.exec(line);
    if (m) sum += Number(m[1]);
  }
  return sum;
}

async function run(bench: string, callers: number, body: (stopAt: number) => Promise<number>[]): Promise<void> {
  const before = await idRequests();
  const t0 = performance.now();
  const counts = await Promise.all(body(t0 + duration * 1000));
  const seconds = (performance.now() - t0) / 1000;
  const requests = (await idRequests()) - before;
  const ids = counts.reduce((a, b) => a + b, 0);
  const out = {
    client: "typescript",
    bench,
    callers,
    ids,
    seconds: Number(seconds.toFixed(3)),
    ids_per_s: Math.round(ids / seconds),
    requests,
    requests_per_million: ids > 0 ? Number(((requests * 1e6) / ids).toFixed(1)) : 0,
  };
  console.log(JSON.stringify(out));
}

async function buffer(callers: number): Promise<void> {
  const c = new Client({ endpoints: [server!] });
  await c.next(); // the layout and the first batch: not part of the measure
  await run("buffer", callers, (stopAt) =>
    Array.from({ length: callers }, async () => {
      let n = 0;
      // Look at the clock once per 1024 IDs: it would cost as much as next() itself.
      while (performance.now() < stopAt) {
        for (let i = 0; i < 1024; i++) await c.next();
        n += 1024;
      }
      return n;
    }),
  );
  c.close();
}

async function bufferTryNext(): Promise<void> {
  const c = new Client({ endpoints: [server!] });
  await c.next();
  await run("buffer_try_next", 1, (stopAt) => [
    (async () => {
      let n = 0;
      while (performance.now() < stopAt) {
        for (let i = 0; i < 1024; i++) {
          if (c.tryNext() === undefined) await c.next();
        }
        n += 1024;
      }
      return n;
    })(),
  ]);
  c.close();
}

async function perRequest(callers: number): Promise<void> {
  const transports = Array.from({ length: callers }, () => new Transport(1));
  const url = new URL(server + "/v1/ids?count=1&format=text");
  await run("per_request", callers, (stopAt) =>
    transports.map(async (t) => {
      let n = 0;
      while (performance.now() < stopAt) {
        const a = await t.get(url, {}, 10_000);
        if (a.status !== 200) throw new Error(`GET ${url}: HTTP ${a.status}: ${a.body}`);
        n++;
      }
      return n;
    }),
  );
  transports.forEach((t) => t.close());
}

await buffer(1);
await buffer(8);
await perRequest(1);
await perRequest(8);
if (withTryNext) await bufferTryNext();
metricsTransport.close();
