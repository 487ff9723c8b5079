package dev.flurry.client;

import java.io.IOException;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.net.http.HttpTimeoutException;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.List;
import java.util.Set;
import java.util.concurrent.CancellationException;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.function.DoubleSupplier;

/**
 * Sends GET requests to the fleet with the contract's retries and failover (docs/clients.md,
 * "Errors and retries" and "A fleet"). Thread-safe: the only shared state is which endpoint to
 * try first.
 */
final class Transport {
  /** The monotonic clock, injectable so unit tests need not wait. */
  interface Ticker {
    long nanoTime();
  }

  /** Sleeping between rounds, injectable so unit tests need not wait. */
  interface Sleeper {
    void sleep(long nanos) throws InterruptedException;
  }

  /**
   * One HTTP answer; {@code sentAt} is the ticker's time just before the request was sent;
   * {@code location} the Location header (a timestamp oracle follower's 307 names the leader).
   */
  record Answer(int status, String retryAfter, byte[] body, Object ids, String endpoint, long sentAt, String location) {
    Answer(int status, String retryAfter, byte[] body, Object ids, String endpoint, long sentAt) {
      this(status, retryAfter, body, ids, endpoint, sentAt, null);
    }

    String text() {
      return body == null ? "" : new String(body, StandardCharsets.UTF_8);
    }
  }

  /** Sends one request to endpoint {@code index}; an IOException is a connection error. */
  interface Attempt {
    Answer send(int index, long timeoutNanos) throws IOException, InterruptedException;
  }

  private final List<String> endpoints;
  private final String authorization;
  private final HttpClient http;
  private final Ticker ticker;
  private final Sleeper sleeper;
  private final DoubleSupplier random;
  /** The endpoint that answered last (or the next one after a failure): tried first. */
  private final AtomicInteger preferred = new AtomicInteger();
  /** Counted down by close(): ends the waits between rounds. */
  private final CountDownLatch closing = new CountDownLatch(1);
  private volatile boolean closed;
  /** The exchanges in flight; close() cancels them, so their callers end at once. */
  private final Set<CompletableFuture<?>> inFlight = ConcurrentHashMap.newKeySet();

  /** {@code sleeper} null: wait between rounds until the time passes or close() runs. */
  Transport(List<String> endpoints, String token, Duration connectTimeout, Ticker ticker, Sleeper sleeper,
            DoubleSupplier random) {
    this.endpoints = endpoints;
    this.authorization = token == null ? null : "Bearer " + token;
    // A direct executor: the HTTP client's selector thread parses the body and completes the
    // response itself, instead of handing each step to a pool thread (measured: a refill of
    // 16,384 IDs took about half the time). Nothing run there blocks.
    this.http = HttpClient.newBuilder().version(HttpClient.Version.HTTP_1_1).connectTimeout(connectTimeout)
        .followRedirects(HttpClient.Redirect.NEVER).executor(Runnable::run).build();
    this.ticker = ticker;
    this.sleeper = sleeper != null ? sleeper : this::sleepUnlessClosed;
    this.random = random;
  }

  private void sleepUnlessClosed(long nanos) throws InterruptedException {
    if (closing.await(nanos, TimeUnit.NANOSECONDS)) throw FlurryClient.closedError();
  }

  /**
   * Ends every call: those sending or waiting between rounds now throw CANCELLED ("the client is
   * closed"), as every later one does. Idempotent.
   */
  void close() {
    closed = true;
    closing.countDown();
    for (CompletableFuture<?> f : inFlight) f.cancel(true);
  }

  /** GET {@code pathAndQuery}; returns a 2xx answer or throws the contract's error. */
  Answer get(String pathAndQuery, long deadline) {
    return get(pathAndQuery, deadline, null);
  }

  /** As above, with a bearer token for this request ({@code null}: the client's). */
  Answer get(String pathAndQuery, long deadline, String token) {
    String auth = token == null ? authorization : "Bearer " + token;
    return run(endpoints, (index, timeoutNanos) -> send(index, pathAndQuery, timeoutNanos, 0, auth), preferred,
        deadline, ticker, sleeper, random);
  }

  /**
   * GET of a format=text ID list of about {@code expected} IDs: a 200 body is parsed as it
   * arrives into {@link Answer#ids()} (a long[], or a String saying what was wrong).
   */
  Answer getIds(String pathAndQuery, int expected, long deadline) {
    return run(endpoints, (index, timeoutNanos) -> send(index, pathAndQuery, timeoutNanos, expected, authorization),
        preferred, deadline, ticker, sleeper, random);
  }

  /**
   * GET {@code pathAndQuery} with the contract's retries, except that a 307 with a Location is
   * returned as it came (tso() follows it to the leader).
   */
  Answer getFollowing(String pathAndQuery, long deadline) {
    return run(endpoints, (index, timeoutNanos) -> send(index, pathAndQuery, timeoutNanos, 0, authorization), preferred,
        deadline, ticker, sleeper, random, true);
  }

  /**
   * Waits the time between retry rounds after {@code round} failed rounds (jitter included),
   * unless it would end after {@code deadline}: then false at once. CANCELLED once closed.
   */
  boolean waitRound(int round, long deadline) {
    long waitNanos = (long) (Errors.retryWaitSeconds(round, 0, random.getAsDouble()) * 1e9);
    if (ticker.nanoTime() + waitNanos > deadline) return false;
    try {
      sleeper.sleep(waitNanos);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      throw new FlurryException("CANCELLED", "interrupted between retries");
    }
    if (closed) throw FlurryClient.closedError();
    return true;
  }

  /**
   * One GET to {@code base} (a timestamp oracle leader, not one of the endpoints), without
   * retries: any answer is returned; an IOException is a connection error.
   */
  Answer getOnce(String base, String pathAndQuery, long timeoutNanos) throws IOException, InterruptedException {
    return sendTo(base, pathAndQuery, timeoutNanos, 0, authorization);
  }

  private Answer send(int index, String pathAndQuery, long timeoutNanos, int expectedIds, String auth)
      throws IOException, InterruptedException {
    return sendTo(endpoints.get(index), pathAndQuery, timeoutNanos, expectedIds, auth);
  }

  private Answer sendTo(String base, String pathAndQuery, long timeoutNanos, int expectedIds, String auth)
      throws IOException, InterruptedException {
    if (closed) throw FlurryClient.closedError();
    HttpRequest.Builder b = HttpRequest.newBuilder(URI.create(base + pathAndQuery))
        .timeout(Duration.ofNanos(Math.max(timeoutNanos, 1_000_000L))).GET();
    if (auth != null) b.header("Authorization", auth);
    long sentAt = ticker.nanoTime();
    HttpResponse.BodyHandler<Object> handler = info -> {
      if (expectedIds > 0 && info.statusCode() == 200) {
        IdsParser p = new IdsParser(expectedIds);
        return HttpResponse.BodySubscribers.fromSubscriber(p, IdsParser::result);
      }
      return HttpResponse.BodySubscribers.mapping(HttpResponse.BodySubscribers.ofByteArray(), bytes -> (Object) bytes);
    };
    CompletableFuture<HttpResponse<Object>> exchange = http.sendAsync(b.build(), handler);
    inFlight.add(exchange);
    HttpResponse<Object> r;
    try {
      if (closed) exchange.cancel(true); // close() ran before the exchange was listed
      r = exchange.get();
    } catch (CancellationException e) {
      throw FlurryClient.closedError(); // only close() cancels
    } catch (ExecutionException e) {
      Throwable cause = e.getCause();
      if (closed) throw FlurryClient.closedError();
      if (cause instanceof IOException) throw (IOException) cause; // HttpTimeoutException too
      if (cause instanceof RuntimeException) throw (RuntimeException) cause;
      throw new IOException(cause);
    } catch (InterruptedException e) {
      exchange.cancel(true);
      throw e;
    } finally {
      inFlight.remove(exchange);
    }
    if (closed) throw FlurryClient.closedError(); // what came back is dropped, never handed out
    Object body = r.body();
    return new Answer(r.statusCode(), r.headers().firstValue("Retry-After").orElse(null),
        body instanceof byte[] ? (byte[]) body : null, body instanceof byte[] ? null : body, base, sentAt,
        r.headers().firstValue("Location").orElse(null));
  }

  /**
   * The retry loop, separate from HTTP so unit tests drive it with fake answers and clocks.
   * Rounds go through the endpoints not yet out, starting with the preferred one; a retry answer
   * moves on, a failover answer also takes its endpoint out of this call, a fatal one is thrown.
   * Between rounds it waits {@link Errors#retryWaitSeconds}, unless that would pass the deadline:
   * then the last error is thrown at once.
   */
  static Answer run(List<String> endpoints, Attempt attempt, AtomicInteger preferred, long deadline, Ticker ticker,
                    Sleeper sleeper, DoubleSupplier random) {
    return run(endpoints, attempt, preferred, deadline, ticker, sleeper, random, false);
  }

  /** As above; with {@code follow}, a 307 with a Location is returned (see getFollowing). */
  static Answer run(List<String> endpoints, Attempt attempt, AtomicInteger preferred, long deadline, Ticker ticker,
                    Sleeper sleeper, DoubleSupplier random, boolean follow) {
    int n = endpoints.size();
    boolean[] out = new boolean[n];
    int outCount = 0;
    FlurryException last = null;
    for (int round = 0; ; round++) {
      long roundRetryAfter = 0;
      int start = Math.floorMod(preferred.get(), n);
      for (int k = 0; k < n; k++) {
        int i = (start + k) % n;
        if (out[i]) continue;
        long left = deadline - ticker.nanoTime();
        if (left <= 0) throw deadlineError(last);
        Answer a;
        try {
          a = attempt.send(i, left);
        } catch (HttpTimeoutException e) {
          last = Errors.connectionError(endpoints.get(i), "timed out: " + e.getMessage());
          preferred.set(i + 1);
          continue;
        } catch (IOException e) {
          last = Errors.connectionError(endpoints.get(i), describe(e));
          preferred.set(i + 1);
          continue;
        } catch (InterruptedException e) {
          Thread.currentThread().interrupt();
          throw new FlurryException("CANCELLED", "interrupted while waiting for " + endpoints.get(i));
        } // a FlurryException (the client was closed) goes up as it is
        Errors.Action action = Errors.action(a.status(), a.retryAfter() != null);
        if (action == Errors.Action.DONE || (follow && a.status() == 307 && a.location() != null)) {
          preferred.set(i);
          return a;
        }
        FlurryException e = Errors.fromAnswer(a.status(), a.retryAfter(), a.text(), a.endpoint());
        if (action == Errors.Action.FATAL) throw e;
        last = e;
        preferred.set(i + 1);
        if (action == Errors.Action.FAILOVER) {
          out[i] = true;
          outCount++;
        } else {
          Long ra = Errors.retryAfterSeconds(a.retryAfter());
          if (ra != null) roundRetryAfter = Math.max(roundRetryAfter, ra);
        }
      }
      if (outCount == n) throw last;
      double waitS = Errors.retryWaitSeconds(round, roundRetryAfter, random.getAsDouble());
      long waitNanos = (long) (waitS * 1e9);
      if (ticker.nanoTime() + waitNanos > deadline) throw last;
      try {
        sleeper.sleep(waitNanos);
      } catch (InterruptedException ie) {
        Thread.currentThread().interrupt();
        throw new FlurryException("CANCELLED", "interrupted between retries");
      }
    }
  }

  private static String describe(IOException e) {
    String m = e.getMessage();
    return e.getClass().getSimpleName() + (m == null || m.isEmpty() ? "" : ": " + m);
  }

  private static FlurryException deadlineError(FlurryException last) {
    if (last != null && last.httpStatus() != 0) return last;
    return new FlurryException("DEADLINE_EXCEEDED", "", "the call's timeout ran out before any server answered"
        + (last == null ? "" : " (last: " + last.getMessage() + ")"), 0, null, last == null ? "" : last.endpoint());
  }
}
