package dev.flurry.client;

import java.net.URI;
import java.net.URLEncoder;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.ThreadLocalRandom;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.locks.Condition;
import java.util.concurrent.locks.ReentrantLock;
import java.util.function.DoubleSupplier;

/**
 * A flurry client: snowflake IDs from a prefetch buffer, segment numbers from ranges held by
 * the client, and local decoding (docs/clients.md is the contract).
 *
 * <p>Thread-safe: one client is meant to be shared by every thread of a process. {@link #next()}
 * from a non-empty buffer takes one atomic increment and an array read; at most one refill
 * request is in flight per client, and callers finding the buffer empty wait for it. Every call
 * raises {@link FlurryException} on failure and finishes within {@code timeout}, retries included.
 */
public final class FlurryClient implements AutoCloseable {
  private final List<String> endpoints;
  private final long maxAgeNanos;
  private final int minBatch;
  private final int maxBatch;
  private final double lowWater;
  final long timeoutNanos;
  final int segmentRange;
  final double segmentPrefetch;
  final Transport transport;
  final Transport.Ticker ticker;
  final ExecutorService background;
  private final ConcurrentHashMap<String, Segment> segments = new ConcurrentHashMap<>();
  private final Object layoutLock = new Object();
  private volatile Layout layout;
  volatile boolean closed;

  /** IDs of one response, taken in order through an atomic index. */
  private static final class Batch {
    final long[] ids;
    final long sentAt;
    /** Taking the ID at this index leaves fewer than low_water × size: start a refill. */
    final int refillAt;
    final AtomicInteger taken = new AtomicInteger();

    Batch(long[] ids, long sentAt, double lowWater) {
      this.ids = ids;
      this.sentAt = sentAt;
      int n = ids.length;
      this.refillAt = Math.max(0, Math.min(n - 1, (int) Math.floor(n - 1 - lowWater * n) + 1));
    }
  }

  // The buffer. `current` is read without the lock on the hot path; everything else under `lock`.
  private volatile Batch current;
  private final ReentrantLock lock = new ReentrantLock();
  private final Condition changed = lock.newCondition();
  private Batch pending;
  private boolean refilling;
  private long refillSeq;
  private long failedSeq = -1;
  private FlurryException failedError;
  private int batchSize; // 0 before the first refill; only refills (one at a time) touch it
  private boolean droppedSinceRefill;
  /** The last refill failed: the next next() starts another, whatever the buffer holds. */
  private volatile boolean refillFailed;

  /** One tso() caller: queued until a request takes it, then given its value or error. */
  private static final class TsoWaiter {
    boolean taken;
    boolean done;
    long value;
    FlurryException error;
  }

  /** Redirects one tso() request follows before it gives up with the last answer's error. */
  private static final int TSO_MAX_REDIRECTS = 4;

  // tso(): callers not yet in a request and whether one is in flight, under tsoLock; the leader
  // that last answered (null: the endpoints), touched only by the caller sending (one at a time).
  private final ReentrantLock tsoLock = new ReentrantLock();
  private final Condition tsoChanged = tsoLock.newCondition();
  private final ArrayDeque<TsoWaiter> tsoQueue = new ArrayDeque<>();
  private boolean tsoBusy;
  private volatile String tsoLeader;

  private FlurryClient(Builder b) {
    this.endpoints = List.copyOf(b.endpoints);
    this.maxAgeNanos = b.maxAge.toNanos();
    this.minBatch = b.minBatch;
    this.maxBatch = b.maxBatch;
    this.lowWater = b.lowWater;
    this.timeoutNanos = b.timeout.toNanos();
    this.segmentRange = b.segmentRange;
    this.segmentPrefetch = b.segmentPrefetch;
    this.ticker = b.ticker;
    this.transport = new Transport(endpoints, b.token, b.timeout, b.ticker, b.sleeper, b.random);
    this.background = Executors.newCachedThreadPool(r -> {
      Thread t = new Thread(r, "flurry-refill");
      t.setDaemon(true);
      return t;
    });
  }

  /** A builder; {@code endpoints} is required, every other setting has the contract's default. */
  public static Builder builder() {
    return new Builder();
  }

  /**
   * The next ID from the buffer (waiting for a refill when it is empty).
   *
   * @throws FlurryException the refill's error, or DEADLINE_EXCEEDED after {@code timeout}
   */
  public long next() {
    Batch b = current;
    if (b != null && ticker.nanoTime() - b.sentAt <= maxAgeNanos) {
      int i = b.taken.getAndIncrement();
      if (i < b.ids.length) {
        if (i == b.refillAt || refillFailed) startRefill(ticker.nanoTime() + timeoutNanos);
        return b.ids[i];
      }
    }
    return nextSlow();
  }

  /**
   * A timestamp from the cluster's timestamp oracle (GET /v1/tso), strictly greater than every
   * timestamp any client got before this call began. Concurrent callers share one request in
   * flight; a caller that arrives while one is in flight waits for the next, which carries every
   * caller waiting then (at most {@code maxBatch}). Nothing is prefetched or kept between calls.
   * A follower's 307 is followed to the leader, which later calls ask directly until it fails (a
   * connection error, 502, 503 or 504). Thread-safe.
   *
   * @throws FlurryException the request's error (NOT_FOUND with reason TSO_OFF when the server
   *     does not serve the oracle), or DEADLINE_EXCEEDED after {@code timeout}
   */
  public long tso() {
    checkOpen();
    long deadline = ticker.nanoTime() + timeoutNanos;
    TsoWaiter me = new TsoWaiter();
    tsoLock.lock();
    try {
      tsoQueue.add(me);
      while (!me.done) {
        if (closed) {
          if (!me.taken) tsoQueue.remove(me);
          throw closedError();
        }
        if (!tsoBusy) {
          sendTsoLocked(); // this caller's entry is in the request, or a later one
          continue;
        }
        long left = deadline - ticker.nanoTime();
        if (left <= 0) {
          if (!me.taken) tsoQueue.remove(me); // a value granted later would be skipped, not reused
          throw new FlurryException("DEADLINE_EXCEEDED", "no timestamp within the timeout: the tso request in flight has not answered");
        }
        try {
          tsoChanged.awaitNanos(left);
        } catch (InterruptedException e) {
          Thread.currentThread().interrupt();
          if (!me.taken) tsoQueue.remove(me);
          throw new FlurryException("CANCELLED", "interrupted while waiting for a timestamp");
        }
      }
    } finally {
      tsoLock.unlock();
    }
    if (me.error != null) throw me.error;
    return me.value;
  }

  /**
   * Sends one request for the callers queued now (at most maxBatch), with the lock released
   * during it, and hands each its timestamp in the order they called.
   */
  private void sendTsoLocked() {
    List<TsoWaiter> batch = new ArrayList<>();
    while (!tsoQueue.isEmpty() && batch.size() < maxBatch) {
      TsoWaiter w = tsoQueue.poll();
      w.taken = true;
      batch.add(w);
    }
    tsoBusy = true;
    tsoLock.unlock();
    long first = 0;
    FlurryException error = null;
    try {
      first = tsoFetch(batch.size(), ticker.nanoTime() + timeoutNanos);
    } catch (FlurryException e) {
      error = e;
    } catch (RuntimeException e) {
      error = new FlurryException("INTERNAL", "tso request failed: " + e);
    } finally {
      tsoLock.lock();
    }
    for (int k = 0; k < batch.size(); k++) {
      TsoWaiter w = batch.get(k);
      w.value = first + k;
      w.error = error;
      w.done = true;
    }
    tsoBusy = false;
    tsoChanged.signalAll();
  }

  /**
   * GET /v1/tso?count= to the leader last seen, else to the endpoints; follows 307s. A leader that
   * failed in this call is asked again only after the wait between retry rounds (the other
   * servers may redirect to it until its lease has run out), until the deadline.
   */
  private long tsoFetch(int count, long deadline) {
    String path = "/v1/tso?count=" + count;
    FlurryException last = null;
    Map<String, FlurryException> failed = new java.util.HashMap<>(); // leaders that failed in this call
    int hops = 0;
    int rounds = 0;
    for (;;) {
      String leader = tsoLeader;
      if (leader == null) {
        Transport.Answer a = transport.getFollowing(path, deadline);
        if (a.status() >= 200 && a.status() < 300) return parseTso(a, count);
        last = Errors.fromAnswer(a.status(), a.retryAfter(), a.text(), a.endpoint());
        leader = leaderBase(a.location());
        if (leader == null) throw last; // a redirect to nowhere we can go: the answer as it came
        FlurryException failure = failed.get(leader);
        if (failure != null) {
          if (!transport.waitRound(rounds++, deadline)) throw failure;
        } else if (++hops > TSO_MAX_REDIRECTS) {
          throw last;
        }
        tsoLeader = leader;
        continue;
      }
      long left = deadline - ticker.nanoTime();
      if (left <= 0) {
        if (last != null) throw last;
        throw new FlurryException("DEADLINE_EXCEEDED", "", "the call's timeout ran out before the leader answered", 0,
            null, leader);
      }
      Transport.Answer a;
      try {
        a = transport.getOnce(leader, path, left);
      } catch (java.io.IOException e) {
        checkOpen();
        last = Errors.connectionError(leader, e.getClass().getSimpleName() + ": " + e.getMessage());
        failed.put(leader, last);
        tsoLeader = null; // back to the endpoints
        continue;
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
        throw new FlurryException("CANCELLED", "interrupted while waiting for " + leader);
      }
      if (a.status() >= 200 && a.status() < 300) return parseTso(a, count);
      last = Errors.fromAnswer(a.status(), a.retryAfter(), a.text(), a.endpoint());
      if (a.status() == 307 && a.location() != null) {
        if (++hops > TSO_MAX_REDIRECTS) throw last;
        String base = leaderBase(a.location());
        if (base == null) throw last;
        tsoLeader = base;
      } else if (a.status() == 502 || a.status() == 503 || a.status() == 504) {
        failed.put(leader, last);
        tsoLeader = null;
      } else {
        throw last;
      }
    }
  }

  /** The scheme://host:port of a 307's Location; null unless an absolute http(s) URL. */
  static String leaderBase(String location) {
    try {
      URI u = new URI(location);
      String scheme = u.getScheme();
      if (("http".equals(scheme) || "https".equals(scheme)) && u.getRawAuthority() != null) {
        return scheme + "://" + u.getRawAuthority();
      }
    } catch (java.net.URISyntaxException e) {
      // not a URL
    }
    return null;
  }

  /** The first timestamp of {"first":"<decimal>","count":N}; UNKNOWN quoting one that does not fit. */
  static long parseTso(Transport.Answer a, int count) {
    try {
      Map<String, Object> j = Json.parseObject(a.text());
      Object first = j.get("first");
      Object n = j.get("count");
      if (first instanceof String && ((String) first).matches("[0-9]{1,20}") && n instanceof Number
          && ((Number) n).longValue() == count && ((Number) n).doubleValue() == count) {
        long v = Long.parseUnsignedLong((String) first);
        if (Long.compareUnsigned(v + count - 1, v) >= 0) return v;
      }
    } catch (Json.ParseException | NumberFormatException e) {
      // quoted below
    }
    String start = a.text().length() > 200 ? a.text().substring(0, 200) : a.text();
    throw new FlurryException("UNKNOWN", "", "a tso answer that does not fit a request for " + count + ": " + start,
        a.status(), null, a.endpoint());
  }

  private long nextSlow() {
    checkOpen();
    long deadline = ticker.nanoTime() + timeoutNanos;
    lock.lock();
    try {
      long waitingOn = -1;
      while (true) {
        checkOpen();
        long now = ticker.nanoTime();
        Batch b = current;
        if (b != null) {
          if (now - b.sentAt <= maxAgeNanos) {
            int i = b.taken.getAndIncrement();
            if (i < b.ids.length) {
              if (i >= b.refillAt || refillFailed) startRefillLocked(deadline);
              return b.ids[i];
            }
          } else if (b.taken.get() < b.ids.length) {
            droppedSinceRefill = true; // stale: dropped whole
          }
          current = null;
        }
        if (pending != null) {
          Batch p = pending;
          pending = null;
          if (now - p.sentAt <= maxAgeNanos) {
            current = p;
            continue;
          }
          droppedSinceRefill = true;
        }
        if (waitingOn >= 0 && failedSeq == waitingOn) throw failedError;
        startRefillLocked(deadline);
        waitingOn = refillSeq;
        long left = deadline - ticker.nanoTime();
        if (left <= 0) {
          throw new FlurryException("DEADLINE_EXCEEDED", "no ID within the timeout: the refill is still running");
        }
        changed.awaitNanos(left);
      }
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      if (closed) throw closedError();
      throw new FlurryException("CANCELLED", "interrupted while waiting for a refill");
    } finally {
      lock.unlock();
    }
  }

  private void startRefill(long deadline) {
    lock.lock();
    try {
      startRefillLocked(deadline);
    } finally {
      lock.unlock();
    }
  }

  /** Starts a refill unless one is running or a refilled batch is waiting; lock held. */
  private void startRefillLocked(long deadline) {
    if (refilling || pending != null || closed) return;
    refilling = true;
    refillFailed = false;
    long seq = ++refillSeq;
    boolean dropped = droppedSinceRefill;
    droppedSinceRefill = false;
    background.execute(() -> refill(seq, deadline, dropped));
  }

  private void refill(long seq, long deadline, boolean dropped) {
    try {
      Layout l = layout(deadline);
      BatchSizer.Event event = batchSize == 0 ? BatchSizer.Event.FIRST
          : dropped ? BatchSizer.Event.EXPIRED : BatchSizer.Event.LOW;
      batchSize = BatchSizer.next(event, batchSize, minBatch, maxBatch, l.maxBatch());
      Transport.Answer a = transport.getIds("/v1/ids?count=" + batchSize + "&format=text", batchSize, deadline);
      Batch b = new Batch(ids(a), a.sentAt(), lowWater);
      lock.lock();
      try {
        refilling = false;
        Batch c = current;
        if (c == null || c.taken.get() >= c.ids.length) {
          current = b;
        } else {
          pending = b;
        }
        changed.signalAll();
      } finally {
        lock.unlock();
      }
    } catch (RuntimeException e) {
      FlurryException fe = e instanceof FlurryException ? (FlurryException) e
          : new FlurryException("INTERNAL", "the refill failed: " + e);
      lock.lock();
      try {
        refilling = false;
        refillFailed = true;
        failedSeq = seq;
        failedError = fe;
        changed.signalAll();
      } finally {
        lock.unlock();
      }
    }
  }

  /** The IDs of a format=text answer (parsed as it arrived), or the error of a malformed one. */
  static long[] ids(Transport.Answer a) {
    if (a.ids() instanceof long[]) return (long[]) a.ids();
    return fail(a, a.ids() instanceof String ? (String) a.ids() : "no body");
  }

  private static long[] fail(Transport.Answer a, String what) {
    throw new FlurryException("UNKNOWN", "", "not a list of decimal IDs: " + what, a.status(), null, a.endpoint());
  }

  /**
   * {@code n} IDs, increasing: from the buffer when it holds that many fresh ones, else by one
   * request of their own.
   *
   * @throws FlurryException INVALID_ARGUMENT unless 1 ≤ n ≤ the server's max_batch
   */
  public long[] next(int n) {
    checkOpen();
    if (n < 1) throw FlurryException.invalidArgument("n must be at least 1, not " + n);
    long deadline = ticker.nanoTime() + timeoutNanos;
    Layout l = layout(deadline);
    if (n > l.maxBatch()) {
      throw FlurryException.invalidArgument("n must be at most the server's max_batch " + l.maxBatch() + ", not " + n);
    }
    Batch b = current;
    if (b != null && ticker.nanoTime() - b.sentAt <= maxAgeNanos) {
      while (true) {
        int i = b.taken.get();
        if (i + n > b.ids.length) break;
        if (b.taken.compareAndSet(i, i + n)) {
          if (i <= b.refillAt && b.refillAt < i + n) startRefill(deadline);
          return java.util.Arrays.copyOfRange(b.ids, i, i + n);
        }
      }
    }
    return ids(transport.getIds("/v1/ids?count=" + n + "&format=text", n, deadline));
  }

  /** The handle of segment tag {@code tag} (the same one for the same tag); thread-safe. */
  public Segment segment(String tag) {
    Objects.requireNonNull(tag, "tag");
    if (tag.isEmpty() || tag.length() > 128 || !tag.chars().allMatch(
        c -> (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' || c == '_' || c == '-')) {
      throw FlurryException.invalidArgument("tag \"" + tag + "\" must be 1 to 128 characters of [A-Za-z0-9._-]");
    }
    return segments.computeIfAbsent(tag, t -> new Segment(this, t));
  }

  /** Decodes an ID locally with the server's layout (read once, lazily). */
  public DecodedId decode(long id) {
    checkOpen();
    return layout(ticker.nanoTime() + timeoutNanos).decode(id);
  }

  /** Decodes an ID given as decimal text (plain digits, below 2^64). */
  public DecodedId decode(String id) {
    checkOpen();
    return layout(ticker.nanoTime() + timeoutNanos).decode(id);
  }

  /**
   * Decodes an order number on the server (it holds the key): {@code GET /v1/order-numbers/{code}}
   * with the client's token (scope {@code orders:decode}).
   *
   * @return the snowflake ID it stands for, with its fields decoded as {@link #decode(long)} does
   *     (or, for a segment tag's number, see {@link #decodeSegmentOrder})
   * @throws FlurryException the server's INVALID_ARGUMENT for a number that does not decode,
   *     UNKNOWN for an answer that does not fit a {@link DecodedOrder}
   */
  public DecodedOrder decodeOrder(String code) {
    return decodeOrder(code, null, null);
  }

  /** Decodes segment tag {@code tag}'s order number on the server ({@code ?tag=}). */
  public DecodedOrder decodeSegmentOrder(String tag, String code) {
    return decodeOrder(code, Objects.requireNonNull(tag, "tag"), null);
  }

  /**
   * Decodes an order number on the server with a tag ({@code null}: a snowflake number) and a
   * token for this call ({@code null}: the client's).
   */
  public DecodedOrder decodeOrder(String code, String tag, String token) {
    checkOpen();
    Objects.requireNonNull(code, "code");
    String path = "/v1/order-numbers/" + urlEncode(code);
    if (tag != null) path += "?tag=" + urlEncode(tag);
    long deadline = ticker.nanoTime() + timeoutNanos;
    Transport.Answer a = transport.get(path, deadline, token);
    return DecodedOrder.fromAnswer(a.text(), () -> layout(deadline));
  }

  private static String urlEncode(String s) {
    return URLEncoder.encode(s, StandardCharsets.UTF_8).replace("+", "%20");
  }

  /** The server's layout, read from /v1/layout on first need. */
  public Layout layout() {
    return layout(ticker.nanoTime() + timeoutNanos);
  }

  Layout layout(long deadline) {
    Layout l = layout;
    if (l != null) return l;
    synchronized (layoutLock) {
      if (layout == null) {
        Transport.Answer a = transport.get("/v1/layout", deadline);
        try {
          layout = Layout.fromJson(parseJson(a));
        } catch (IllegalArgumentException e) {
          throw new FlurryException("UNKNOWN", "", "bad /v1/layout: " + e.getMessage(), a.status(), null, a.endpoint());
        }
      }
      return layout;
    }
  }

  static Map<String, Object> parseJson(Transport.Answer a) {
    try {
      return Json.parseObject(a.text());
    } catch (Json.ParseException e) {
      throw new FlurryException("UNKNOWN", "", "bad answer: " + e.getMessage(), a.status(), null, a.endpoint());
    }
  }

  void checkOpen() {
    if (closed) throw closedError();
  }

  /** What every call of a closed client, and every call waiting when it closed, throws. */
  static FlurryException closedError() {
    return new FlurryException("CANCELLED", "the client is closed");
  }

  /**
   * Closes the client: IDs left in the buffer are discarded, requests in flight are abandoned,
   * and every later call, as every call waiting now, throws CANCELLED ("the client is closed").
   * Idempotent.
   */
  @Override
  public void close() {
    closed = true;
    transport.close();
    current = null;
    lock.lock();
    try {
      pending = null;
      changed.signalAll();
    } finally {
      lock.unlock();
    }
    for (Segment s : segments.values()) s.wake();
    tsoLock.lock();
    try {
      tsoChanged.signalAll();
    } finally {
      tsoLock.unlock();
    }
    background.shutdownNow();
  }

  /**
   * Settings, validated by {@link #build()}: a bad one raises {@link FlurrySettingsException} (an
   * IllegalArgumentException) naming it. Durations must be positive.
   */
  public static final class Builder {
    private List<String> endpoints = new ArrayList<>();
    private String token;
    private Duration maxAge = Duration.ofSeconds(1);
    private int minBatch = 256;
    private int maxBatch = 16384;
    private double lowWater = 0.5;
    private Duration timeout = Duration.ofSeconds(5);
    private int segmentRange = 1000;
    private double segmentPrefetch = 0.1;
    private Transport.Ticker ticker = System::nanoTime;
    private Transport.Sleeper sleeper; // null: the transport's own, which close() ends
    private DoubleSupplier random = () -> ThreadLocalRandom.current().nextDouble();

    private Builder() {}

    /** One or more {@code http://HOST:PORT} (or https) base URLs, tried in this order. */
    public Builder endpoints(String... urls) {
      this.endpoints = new ArrayList<>(java.util.Arrays.asList(urls)); // a null is refused by build()
      return this;
    }

    public Builder endpoints(List<String> urls) {
      this.endpoints = new ArrayList<>(urls);
      return this;
    }

    /** A bearer token sent on every request. */
    public Builder token(String token) {
      this.token = token;
      return this;
    }

    /** IDs fetched longer ago than this are never handed out (default 1 s). */
    public Builder maxAge(Duration d) {
      this.maxAge = d;
      return this;
    }

    public Builder minBatch(int n) {
      this.minBatch = n;
      return this;
    }

    public Builder maxBatch(int n) {
      this.maxBatch = n;
      return this;
    }

    /** A refill starts when fewer than lowWater × batch IDs are left; in (0, 1). */
    public Builder lowWater(double f) {
      this.lowWater = f;
      return this;
    }

    /** The deadline of one call, retries included (default 5 s). */
    public Builder timeout(Duration d) {
      this.timeout = d;
      return this;
    }

    public Builder segmentRange(int n) {
      this.segmentRange = n;
      return this;
    }

    /** Share of a segment range used before the next is fetched; in (0, 1). */
    public Builder segmentPrefetch(double f) {
      this.segmentPrefetch = f;
      return this;
    }

    Builder ticker(Transport.Ticker t) {
      this.ticker = t;
      return this;
    }

    Builder sleeper(Transport.Sleeper s) {
      this.sleeper = s;
      return this;
    }

    Builder random(DoubleSupplier r) {
      this.random = r;
      return this;
    }

    /** Validates the settings and makes the client (no network I/O yet). */
    public FlurryClient build() {
      if (endpoints == null || endpoints.isEmpty()) throw bad("endpoints", "at least one is needed");
      List<String> clean = new ArrayList<>();
      for (String e : endpoints) {
        if (e == null) throw bad("endpoints", "null is not a URL");
        URI u;
        try {
          u = URI.create(e);
        } catch (IllegalArgumentException notUri) {
          throw bad("endpoints", "\"" + e + "\" is not a URL");
        }
        if (!("http".equals(u.getScheme()) || "https".equals(u.getScheme())) || u.getHost() == null) {
          throw bad("endpoints", "\"" + e + "\" is not an http:// or https:// URL");
        }
        clean.add(e.endsWith("/") ? e.substring(0, e.length() - 1) : e);
      }
      endpoints = clean;
      positive("maxAge", maxAge);
      positive("timeout", timeout);
      if (minBatch < 1) throw bad("minBatch", "must be at least 1, not " + minBatch);
      if (maxBatch < minBatch) throw bad("minBatch", minBatch + " is larger than maxBatch " + maxBatch);
      if (!(lowWater > 0 && lowWater < 1)) throw bad("lowWater", "must be in (0, 1), not " + lowWater);
      if (segmentRange < 1) throw bad("segmentRange", "must be at least 1, not " + segmentRange);
      if (!(segmentPrefetch > 0 && segmentPrefetch < 1)) {
        throw bad("segmentPrefetch", "must be in (0, 1), not " + segmentPrefetch);
      }
      if (token != null && (token.isEmpty() || token.contains("\r") || token.contains("\n"))) {
        throw bad("token", "must be a non-empty string on one line");
      }
      return new FlurryClient(this);
    }

    private static FlurrySettingsException bad(String setting, String why) {
      return new FlurrySettingsException(setting, why);
    }

    private static void positive(String name, Duration d) {
      if (d == null || d.isZero() || d.isNegative()) throw bad(name, "must be positive, not " + d);
    }
  }
}
