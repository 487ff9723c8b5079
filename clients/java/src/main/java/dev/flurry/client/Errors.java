package dev.flurry.client;

import java.time.Duration;
import java.util.Map;

/**
 * What an answer means (docs/clients.md, "Errors and retries"): the error it becomes and what
 * the client does next. Pure functions, public so the conformance suite can check them.
 */
public final class Errors {
  private Errors() {}

  /** What a client does with an answer. */
  public enum Action { DONE, RETRY, FAILOVER, FATAL }

  /** The action for an HTTP status (0 = connection error) and whether Retry-After was given. */
  public static Action action(int status, boolean hasRetryAfter) {
    if (status == 0) return Action.RETRY;
    if (status >= 200 && status < 300) return Action.DONE;
    if (status == 502 || status == 503 || status == 504) return hasRetryAfter ? Action.RETRY : Action.FAILOVER;
    return Action.FATAL;
  }

  /**
   * Retry-After in whole seconds, or null when the header is absent. Only delta-seconds are
   * read; any other value (a date, a fraction, a negative number) counts as 1 s.
   */
  public static Long retryAfterSeconds(String header) {
    if (header == null) return null;
    String t = header.trim();
    if (t.isEmpty() || t.length() > 18) return 1L;
    for (int i = 0; i < t.length(); i++) {
      if (t.charAt(i) < '0' || t.charAt(i) > '9') return 1L;
    }
    return Long.parseLong(t);
  }

  /** The error an HTTP answer that is not 2xx becomes. */
  public static FlurryException fromAnswer(int status, String retryAfterHeader, String body, String endpoint) {
    Long ra = retryAfterSeconds(retryAfterHeader);
    Duration retryAfter = ra == null ? null : Duration.ofSeconds(ra);
    if (body != null) {
      try {
        Object v = Json.parse(body);
        if (v instanceof Map && ((Map<?, ?>) v).get("error") instanceof Map) {
          Map<?, ?> e = (Map<?, ?>) ((Map<?, ?>) v).get("error");
          if (e.get("code") instanceof String) {
            Object reason = e.get("reason");
            Object message = e.get("message");
            return new FlurryException((String) e.get("code"), reason instanceof String ? (String) reason : "",
                message instanceof String ? (String) message : "", status, retryAfter, endpoint);
          }
        }
      } catch (Json.ParseException notJson) {
        // Not flurry's error JSON: not guessed at, below.
      }
    }
    String code = (status == 502 || status == 503 || status == 504) ? "UNAVAILABLE" : "UNKNOWN";
    String start = body == null ? "" : body.strip();
    if (start.length() > 200) start = start.substring(0, 200) + "...";
    String message = "HTTP " + status + (start.isEmpty() ? "" : ": " + start);
    return new FlurryException(code, "", message, status, retryAfter, endpoint);
  }

  /** The error of a request that got no HTTP answer (refused, reset, timed out). */
  public static FlurryException connectionError(String endpoint, String what) {
    return new FlurryException("UNAVAILABLE", "", endpoint + ": " + what, 0, null, endpoint);
  }

  /**
   * The wait before round {@code round + 1} in seconds: max(retry_after, min(0.1 s × 2^round,
   * 5 s)) × (1 + 0.2 × u), u uniform in [0, 1).
   */
  public static double retryWaitSeconds(int round, double retryAfterSeconds, double u) {
    double backoff = round >= 6 ? 5.0 : Math.min(0.1 * Math.pow(2, round), 5.0);
    return Math.max(retryAfterSeconds, backoff) * (1.0 + 0.2 * u);
  }
}
