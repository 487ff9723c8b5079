package dev.flurry.client;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

/** The client against real servers behind fleet.py's proxies (docs/clients.md). */
class IntegrationTest {
  private Fleet fleet;

  @BeforeEach
  void setUp() {
    fleet = new Fleet();
    fleet.resetStats();
  }

  @AfterEach
  void putTheFleetBack() {
    fleet.restore();
  }

  private FlurryClient.Builder client(String... endpoints) {
    return FlurryClient.builder().endpoints(endpoints);
  }

  /** Runs `callers` threads, each returning what it took. */
  private static List<long[]> inParallel(int callers, java.util.function.Supplier<long[]> work) throws Exception {
    ExecutorService pool = Executors.newFixedThreadPool(callers);
    try {
      List<Future<long[]>> fs = new ArrayList<>();
      for (int i = 0; i < callers; i++) fs.add(pool.submit(work::get));
      List<long[]> out = new ArrayList<>();
      for (Future<long[]> f : fs) out.add(f.get(60, TimeUnit.SECONDS));
      return out;
    } finally {
      pool.shutdownNow();
    }
  }

  private static void assertIncreasingAndDistinct(List<long[]> perCaller, int total) {
    long[] all = new long[total];
    int n = 0;
    for (long[] ids : perCaller) {
      for (int i = 1; i < ids.length; i++) {
        assertTrue(ids[i] > ids[i - 1], "a caller's IDs are strictly increasing: " + ids[i - 1] + " then " + ids[i]);
      }
      System.arraycopy(ids, 0, all, n, ids.length);
      n += ids.length;
    }
    assertEquals(total, n);
    Arrays.sort(all);
    for (int i = 1; i < all.length; i++) assertTrue(all[i] != all[i - 1], "ID " + all[i] + " handed out twice");
  }

  // a. 10^6 IDs, 32 callers: distinct, each caller's increasing, one request in flight, few requests.
  @Test
  void millionIdsFromThirtyTwoCallers() throws Exception {
    long before = Fleet.idRequests(fleet.servers, "200", fleet);
    try (FlurryClient c = client(fleet.endpoints.toArray(new String[0])).build()) {
      int callers = 32, each = 1_000_000 / 32;
      List<long[]> got = inParallel(callers, () -> {
        long[] ids = new long[each];
        for (int i = 0; i < each; i++) ids[i] = c.next();
        return ids;
      });
      assertIncreasingAndDistinct(got, callers * each);
    }
    long requests = Fleet.idRequests(fleet.servers, "200", fleet) - before;
    assertTrue(requests <= 100, "the server saw " + requests + " ID requests for 10^6 IDs (at most 100)");
    for (int i = 0; i < fleet.endpoints.size(); i++) {
      assertTrue(fleet.stat(i, "ids", "max_in_flight") <= 1, "at most one ID request in flight through proxy " + i);
    }
  }

  // b. max_age: after idling longer than max_age, no stale ID is handed out; a new request is sent.
  @Test
  void noIdOlderThanMaxAge() throws Exception {
    try (FlurryClient c = client(fleet.endpoints.get(0)).maxAge(Duration.ofMillis(200)).build()) {
      c.next();
      for (int round = 0; round < 3; round++) {
        Thread.sleep(400); // the idle time is the point of the test
        long requestsBefore = fleet.stat(0, "ids", "requests");
        for (int k = 0; k < 20; k++) {
          long wallBefore = System.currentTimeMillis();
          long id = c.next();
          long idMs = c.decode(id).unixMs();
          assertTrue(idMs >= wallBefore - 200 - 1, "ID " + id + " is " + (wallBefore - idMs) + " ms old (max_age 200 ms)");
        }
        assertTrue(fleet.stat(0, "ids", "requests") > requestsBefore, "a new ID request after the idle time");
      }
    }
  }

  // c. 503 + Retry-After 1, twice: retried after the time asked; with a short timeout, fails fast.
  @Test
  void retriesAfterRetryAfterAndFailsFastWithinTimeout() {
    try (FlurryClient c = client(fleet.endpoints.get(0)).timeout(Duration.ofSeconds(5)).build()) {
      c.layout(); // read before the fault, so the faults hit ID requests
      fleet.control(0, "fault?status=503&count=2&retry_after=1&reason=LEASE_EXPIRING");
      long t0 = System.nanoTime();
      c.next();
      double s = (System.nanoTime() - t0) / 1e9;
      assertTrue(s >= 2.0 && s < 5.0, "next() took " + s + " s (Retry-After 1 twice: at least 2 s)");
      assertEquals(2, fleet.stat(0, "faulted", null));
    }
    try (FlurryClient c = client(fleet.endpoints.get(0)).timeout(Duration.ofMillis(500)).build()) {
      c.layout();
      fleet.control(0, "fault?status=503&count=1&retry_after=1&reason=LEASE_EXPIRING");
      long t0 = System.nanoTime();
      FlurryException e = assertThrows(FlurryException.class, c::next);
      double s = (System.nanoTime() - t0) / 1e9;
      assertTrue(s < 0.5, "failed after " + s + " s: the wait would pass the deadline, so at once");
      assertEquals("UNAVAILABLE", e.code());
      assertEquals("LEASE_EXPIRING", e.reason());
      assertEquals(503, e.httpStatus());
      assertEquals(Duration.ofSeconds(1), e.retryAfter().orElseThrow());
      assertEquals(fleet.endpoints.get(0), e.endpoint());
    }
  }

  // d. 4xx is never retried.
  @Test
  void fourHundredsAreNeverRetried() {
    try (FlurryClient c = client(fleet.endpoints.toArray(new String[0])).build()) {
      c.layout();
      fleet.resetStats();
      FlurryException e = assertThrows(FlurryException.class, () -> c.segment("no-such-tag").next());
      assertEquals("NOT_FOUND", e.code());
      assertEquals(404, e.httpStatus());
      assertEquals(1, fleet.stat(0, "segments", "requests") + fleet.stat(1, "segments", "requests"));

      fleet.control(0, "fault?status=400&count=1&code=INVALID_ARGUMENT&reason=INJECTED");
      e = assertThrows(FlurryException.class, c::next);
      assertEquals("INVALID_ARGUMENT", e.code());
      assertEquals("INJECTED", e.reason());
      assertEquals(400, e.httpStatus());
      assertEquals(1, fleet.stat(0, "ids", "requests") + fleet.stat(1, "ids", "requests"));
    }
  }

  // e. Failover: server 0 killed, IDs keep coming from server 1, none twice.
  @Test
  void failsOverWhenServerZeroIsKilled() {
    long node1 = fleet.node(1);
    try (FlurryClient c = client(fleet.endpoints.toArray(new String[0])).build()) {
      Set<Long> seen = new HashSet<>();
      for (int i = 0; i < 2000; i++) assertTrue(seen.add(c.next()));
      fleet.control(0, "kill");
      boolean fromServer1 = false;
      for (int i = 0; i < 50_000; i++) {
        long id = c.next();
        assertTrue(seen.add(id), "ID " + id + " handed out twice");
        if (i > 40_000 && c.decode(id).node() == node1) fromServer1 = true;
      }
      assertTrue(fromServer1, "IDs from server 1 (node " + node1 + ") after server 0 was killed");
    }
  }

  // f. Server 0 killed while the refill is held in flight: the waiting next() gets server 1's ID.
  @Test
  void failsOverWhenKilledDuringRefill() throws Exception {
    long node1 = fleet.node(1);
    try (FlurryClient c = client(fleet.endpoints.toArray(new String[0])).build()) {
      c.layout();
      fleet.control(0, "delay?ms=3000&count=1");
      long t0 = System.nanoTime();
      CompletableFuture<Long> id = CompletableFuture.supplyAsync(c::next);
      while (fleet.stat(0, "ids", "in_flight") < 1) Thread.sleep(10); // the refill is held
      Thread.sleep(300);
      fleet.control(0, "kill");
      long got = id.get(10, TimeUnit.SECONDS);
      double s = (System.nanoTime() - t0) / 1e9;
      assertEquals(node1, c.decode(got).node(), "the ID comes from server 1");
      assertTrue(s < 2.5, "next() returned after " + s + " s (timeout 5 s, delay 3 s)");
    }
  }

  // g. Segment numbers: distinct, in order per caller, ranges of 100, one range request in flight.
  @Test
  void segmentNumbersOnceEachAndInOrder() throws Exception {
    try (FlurryClient c = client(fleet.endpoints.toArray(new String[0])).segmentRange(100).build()) {
      Segment orders = c.segment("orders");
      assertTrue(orders == c.segment("orders"), "the same handle for the same tag");
      List<long[]> got = inParallel(8, () -> {
        long[] v = new long[625];
        for (int i = 0; i < v.length; i++) v[i] = orders.next();
        return v;
      });
      assertIncreasingAndDistinct(got, 5000);
    }
    long ranges = fleet.stat(0, "segments", "requests") + fleet.stat(1, "segments", "requests");
    assertTrue(ranges >= 50, ranges + " range requests for 5000 numbers of ranges of 100");
    for (int i = 0; i < 2; i++) assertTrue(fleet.stat(i, "segments", "max_in_flight") <= 1);
  }

  // h. decode against the running server's layout equals GET /v1/ids/{id}.
  @Test
  void decodeMatchesTheServer() {
    try (FlurryClient c = client(fleet.endpoints.toArray(new String[0])).build()) {
      long[] ids = c.next(20);
      for (long id : ids) {
        Map<String, Object> server = fleet.getJson(fleet.servers.get(0) + "/v1/ids/" + id);
        DecodedId d = c.decode(Long.toString(id));
        assertEquals(d, c.decode(id));
        assertEquals(server.get("time"), d.time());
        assertEquals(server.get("unix_ms"), d.unixMs());
        assertEquals(server.get("ticks"), d.ticks());
        assertEquals(server.get("node"), d.node());
        assertEquals(server.get("seq"), d.seq());
        Map<?, ?> fields = (Map<?, ?>) server.get("fields");
        assertEquals(fields.size(), d.fields().size());
        for (DecodedId.Field f : d.fields()) assertEquals(fields.get(f.name()), f.value(), f.name());
      }
      assertThrows(FlurryException.class, () -> c.next(0));
      assertEquals("INVALID_ARGUMENT", assertThrows(FlurryException.class, () -> c.next(100_001)).code());
    }
  }

  private String orderNumber(String tag) {
    Map<String, Object> issued = fleet.getJson(fleet.endpoints.get(0) + "/v1/order-numbers?count=1"
        + (tag == null ? "" : "&tag=" + tag));
    return (String) ((List<?>) issued.get("order_numbers")).get(0);
  }

  // decodeOrder: a typed DecodedOrder of either variant, decoded by the server with the client's
  // token (scope orders:decode) or the call's; without one, 401; a mistyped number, 400.
  @Test
  void decodeOrderAsksTheServer() {
    String number = orderNumber(null);
    String segNumber = orderNumber("orders");
    DecodedOrder d;
    try (FlurryClient c = client(fleet.endpoints.toArray(new String[0])).token(fleet.adminToken).build()) {
      d = c.decodeOrder(number);
      assertEquals(DecodedOrder.Source.SNOWFLAKE, d.source());
      assertEquals(number, d.orderNumber());
      assertEquals("1", d.keyVersion());
      assertEquals(java.util.Optional.empty(), d.tag());
      assertEquals(c.decode(d.id()), d.decoded().orElseThrow());
      DecodedOrder s = c.decodeSegmentOrder("orders", segNumber);
      assertEquals(DecodedOrder.Source.SEGMENT, s.source());
      assertEquals(java.util.Optional.of("orders"), s.tag());
      assertEquals(java.util.Optional.empty(), s.decoded());
      assertEquals(segNumber, s.orderNumber());
      assertTrue(s.id() > 0);
      char last = number.charAt(number.length() - 1);
      String typo = number.substring(0, number.length() - 1) + (char) ('0' + (last - '0' + 1) % 10);
      FlurryException e = assertThrows(FlurryException.class, () -> c.decodeOrder(typo));
      assertEquals("INVALID_ARGUMENT", e.code());
      assertEquals(400, e.httpStatus());
    }
    try (FlurryClient c = client(fleet.endpoints.toArray(new String[0])).build()) {
      FlurryException e = assertThrows(FlurryException.class, () -> c.decodeOrder(number));
      assertEquals("UNAUTHENTICATED", e.code());
      assertEquals(401, e.httpStatus());
      assertEquals(d, c.decodeOrder(number, null, fleet.adminToken));
    }
  }

  private static void assertClosed(String what, FlurryException e) {
    assertEquals("CANCELLED", e.code(), what);
    assertEquals("the client is closed", e.getMessage(), what);
    assertEquals("", e.reason(), what);
    assertEquals(0, e.httpStatus(), what);
  }

  private static void assertClosed(String what, Runnable call) {
    assertClosed(what, assertThrows(FlurryException.class, call::run, what));
  }

  // close(): every call after it, and every call waiting when it runs (for a held answer, another
  // caller's refill, a range, or between retry rounds), throws CANCELLED at once.
  @Test
  void closeEndsEveryCall() throws Exception {
    final long heldMs = 8000;
    String number = orderNumber(null);
    FlurryClient c = client(fleet.endpoints.toArray(new String[0])).token(fleet.adminToken)
        .timeout(Duration.ofMinutes(1)).build();
    c.decode(1); // the layout is read before the servers are held
    for (int i = 0; i < fleet.endpoints.size(); i++) fleet.control(i, "delay?ms=" + heldMs + "&count=100");
    Map<String, Runnable> calls = new java.util.LinkedHashMap<>();
    calls.put("next", c::next);
    calls.put("next again", c::next);
    calls.put("next(100)", () -> c.next(100));
    calls.put("segment next", () -> c.segment("orders").next());
    calls.put("decodeOrder", () -> c.decodeOrder(number));
    ExecutorService pool = Executors.newFixedThreadPool(calls.size());
    try {
      Map<String, Future<?>> running = new java.util.LinkedHashMap<>();
      for (Map.Entry<String, Runnable> call : calls.entrySet()) running.put(call.getKey(), pool.submit(call.getValue()));
      Thread.sleep(1000); // every call is now waiting
      long closedAt = System.nanoTime();
      c.close();
      for (Map.Entry<String, Future<?>> r : running.entrySet()) {
        java.util.concurrent.ExecutionException e = assertThrows(java.util.concurrent.ExecutionException.class,
            () -> r.getValue().get(60, TimeUnit.SECONDS), r.getKey());
        assertTrue(e.getCause() instanceof FlurryException, r.getKey() + ": " + e.getCause());
        assertClosed(r.getKey() + " waiting", (FlurryException) e.getCause());
      }
      long tookMs = (System.nanoTime() - closedAt) / 1_000_000;
      assertTrue(tookMs < heldMs - 2000, "the calls ended " + tookMs + " ms after close(), as late as the held answers");
    } finally {
      pool.shutdownNow();
    }
    c.close(); // idempotent
    for (Map.Entry<String, Runnable> call : calls.entrySet()) assertClosed(call.getKey() + " after close", call.getValue());
    assertClosed("decode after close", () -> c.decode(1));

    for (int i = 0; i < fleet.endpoints.size(); i++) {
      fleet.control(i, "delay?ms=0&count=0");
      fleet.control(i, "fault?status=503&retry_after=30&count=100");
    }
    FlurryClient waiting = client(fleet.endpoints.toArray(new String[0])).timeout(Duration.ofMinutes(1)).build();
    CompletableFuture<long[]> f = CompletableFuture.supplyAsync(() -> waiting.next(5));
    Thread.sleep(1000); // waiting 30 s between rounds
    long closedAt = System.nanoTime();
    waiting.close();
    java.util.concurrent.ExecutionException e = assertThrows(java.util.concurrent.ExecutionException.class,
        () -> f.get(60, TimeUnit.SECONDS));
    assertClosed("next(5) between retry rounds", (FlurryException) e.getCause());
    assertTrue(System.nanoTime() - closedAt < 10_000_000_000L);
  }

  // A failed background refill is not sticky: the next next() starts another, while IDs remain.
  @Test
  void aFailedRefillIsFollowedByANewOne() throws Exception {
    try (FlurryClient c = client(fleet.endpoints.get(0)).build()) {
      c.next(); // the first batch: 256 IDs, a refill starts at the 129th
      fleet.control(0, "fault?status=500&count=1");
      for (int i = 0; i < 128; i++) c.next();
      waitFor(() -> fleet.stat(0, "faulted", null) == 1);
      assertEquals(2, fleet.stat(0, "ids", "requests"));
      c.next(); // 127 IDs are still buffered; this call starts a new refill
      waitFor(() -> fleet.stat(0, "ids", "requests") == 3);
    }
  }

  private static void waitFor(java.util.function.BooleanSupplier condition) throws InterruptedException {
    long deadline = System.nanoTime() + 5_000_000_000L;
    while (!condition.getAsBoolean()) {
      assertTrue(System.nanoTime() < deadline, "condition not met within 5 s");
      Thread.sleep(10);
    }
  }
}
