package dev.flurry.client;

import java.time.Duration;
import java.util.Optional;

/**
 * Every failure of the client: a server's error answer, a connection error, a deadline, or a
 * bad argument or setting. Unchecked, because nearly every call can fail only for reasons the
 * caller cannot handle locally (the fleet is down, the call's timeout ran out), and checked
 * exceptions would force a try/catch around every {@code next()} in callers' hot loops.
 *
 * <p>{@link #code()} is the canonical code name ({@code UNAVAILABLE}, {@code INVALID_ARGUMENT},
 * ...), {@link #reason()} the server's reason or "", {@link #httpStatus()} 0 when no HTTP answer
 * came, {@link #retryAfter()} the answer's Retry-After, {@link #endpoint()} the base URL that
 * answered ("" when the error is the client's own).
 */
public class FlurryException extends RuntimeException {
  private static final long serialVersionUID = 1L;
  private final String code;
  private final String reason;
  private final int httpStatus;
  private final Duration retryAfter;
  private final String endpoint;

  public FlurryException(String code, String reason, String message, int httpStatus,
                         Duration retryAfter, String endpoint) {
    super(message);
    this.code = code;
    this.reason = reason == null ? "" : reason;
    this.httpStatus = httpStatus;
    this.retryAfter = retryAfter;
    this.endpoint = endpoint == null ? "" : endpoint;
  }

  FlurryException(String code, String message) {
    this(code, "", message, 0, null, "");
  }

  static FlurryException invalidArgument(String message) {
    return new FlurryException("INVALID_ARGUMENT", message);
  }

  /** The canonical code name, e.g. {@code UNAVAILABLE}. */
  public String code() {
    return code;
  }

  /** The server's reason (e.g. {@code LEASE_EXPIRING}), or "" when it gave none. */
  public String reason() {
    return reason;
  }

  /** The HTTP status of the answer, 0 when no answer came (connection error, deadline). */
  public int httpStatus() {
    return httpStatus;
  }

  /** The answer's Retry-After (whole seconds), empty when it had none. */
  public Optional<Duration> retryAfter() {
    return Optional.ofNullable(retryAfter);
  }

  /** The base URL of the endpoint that answered or failed, "" for the client's own errors. */
  public String endpoint() {
    return endpoint;
  }

  @Override
  public String toString() {
    StringBuilder b = new StringBuilder("FlurryException ").append(code);
    if (!reason.isEmpty()) b.append('/').append(reason);
    if (httpStatus != 0) b.append(" (HTTP ").append(httpStatus).append(')');
    if (!endpoint.isEmpty()) b.append(" from ").append(endpoint);
    return b.append(": ").append(getMessage()).toString();
  }
}
