// One GET over node:http / node:https with keep-alive connections (Node 18 APIs only).

import * as http from "node:http";
import * as https from "node:https";

/** An HTTP answer, whole. */
export interface Answer {
  status: number;
  retryAfter: string | undefined;
  /** The Location header (a 307 of a timestamp oracle follower names the leader). */
  location?: string;
  body: string;
}

/** Raised when no HTTP answer came: refused, reset, timed out (`timedOut`) or aborted. */
export class ConnectionFailure extends Error {
  constructor(
    message: string,
    readonly timedOut: boolean,
    readonly aborted: boolean,
  ) {
    super(message);
  }
}

/** Keep-alive agents, one per scheme; `maxSockets` bounds connections per endpoint. */
export class Transport {
  private readonly httpAgent: http.Agent;
  private readonly httpsAgent: https.Agent;

  constructor(maxSockets = Infinity) {
    this.httpAgent = new http.Agent({ keepAlive: true, maxSockets });
    this.httpsAgent = new https.Agent({ keepAlive: true, maxSockets });
  }

  /**
   * GETs `url`, giving up after `timeoutMs` (ConnectionFailure with timedOut) or when `signal`
   * aborts. Never rejects for an HTTP status: any answer resolves.
   */
  get(url: URL, headers: Record<string, string>, timeoutMs: number, signal?: AbortSignal): Promise<Answer> {
    return new Promise<Answer>((resolve, reject) => {
      const secure = url.protocol === "https:";
      const mod = secure ? https : http;
      let settled = false;
      const fail = (message: string, timedOut: boolean, aborted: boolean) => {
        if (settled) return;
        settled = true;
        cleanup();
        req.destroy();
        reject(new ConnectionFailure(message, timedOut, aborted));
      };
      const req = mod.request(
        url,
        { method: "GET", headers, agent: secure ? this.httpsAgent : this.httpAgent },
        (res) => {
          const chunks: Buffer[] = [];
          res.on("data", (c: Buffer) => chunks.push(c));
          res.on("end", () => {
            if (settled) return;
            settled = true;
            cleanup();
            const ra = res.headers["retry-after"];
            resolve({
              status: res.statusCode ?? 0,
              retryAfter: Array.isArray(ra) ? ra[0] : ra,
              location: res.headers.location,
              body: Buffer.concat(chunks).toString("utf8"),
            });
          });
          res.on("error", (e: Error) => fail(`response broken: ${e.message}`, false, false));
          res.on("aborted", () => fail("response aborted (connection reset)", false, false));
        },
      );
      const timer = setTimeout(() => fail(`no answer within ${Math.round(timeoutMs)} ms`, true, false), Math.max(0, timeoutMs));
      const onAbort = () => fail("aborted by the caller", false, true);
      const cleanup = () => {
        clearTimeout(timer);
        signal?.removeEventListener("abort", onAbort);
      };
      if (signal) {
        if (signal.aborted) {
          queueMicrotask(onAbort);
        } else {
          signal.addEventListener("abort", onAbort, { once: true });
        }
      }
      req.on("error", (e: Error) => fail(e.message, false, false));
      req.end();
    });
  }

  /** Closes idle keep-alive connections; later requests open new ones. */
  close(): void {
    this.httpAgent.destroy();
    this.httpsAgent.destroy();
  }
}
