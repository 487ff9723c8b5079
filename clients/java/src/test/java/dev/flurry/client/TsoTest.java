package dev.flurry.client;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

/**
 * tso() against the fleet's servers, run with --tso: two servers sharing one SQLite registry, so
 * one leads the timestamp oracle and the other redirects to it (docs/clients.md, "Timestamps").
 */
class TsoTest {
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

  private static List<long[]> inParallel(int callers, int each, FlurryClient c) throws Exception {
    ExecutorService pool = Executors.newFixedThreadPool(callers);
    try {
      List<Future<long[]>> fs = new ArrayList<>();
      for (int i = 0; i < callers; i++) {
        fs.add(pool.submit(() -> {
          long[] out = new long[each];
          for (int k = 0; k < each; k++) out[k] = c.tso();
          return out;
        }));
      }
      List<long[]> out = new ArrayList<>();
      for (Future<long[]> f : fs) out.add(f.get(120, TimeUnit.SECONDS));
      return out;
    } finally {
      pool.shutdownNow();
    }
  }

  private static void assertIncreasing(long[] values) {
    for (int i = 1; i < values.length; i++) {
      assertTrue(values[i] > values[i - 1], "strictly increasing: " + values[i - 1] + " then " + values[i]);
    }
  }

  @Test
  void sequentialCallsIncreaseWithinAndAcrossClients() throws Exception {
    fleet.tsoLeader(); // a test before may have killed the leader: wait out the election
    long[] values = new long[600];
    try (FlurryClient c = FlurryClient.builder().endpoints(fleet.endpoints).build()) {
      for (int i = 0; i < 500; i++) values[i] = c.tso();
    }
    // A call that begins after another ended gets a larger value, whichever client made it.
    try (FlurryClient a = FlurryClient.builder().endpoints(fleet.endpoints.get(0)).build();
         FlurryClient b = FlurryClient.builder().endpoints(fleet.endpoints.get(1)).build()) {
      for (int i = 500; i < 600; i += 2) {
        values[i] = a.tso();
        values[i + 1] = b.tso();
      }
    }
    assertIncreasing(values);
  }

  @Test
  void concurrentCallersShareRequests() throws Exception {
    int leader = fleet.tsoLeader();
    int callers = 32;
    int each = 300;
    List<long[]> per;
    // Only the leader's proxy: every request passes it and is counted, none is redirected.
    try (FlurryClient c = FlurryClient.builder().endpoints(fleet.endpoints.get(leader)).build()) {
      per = inParallel(callers, each, c);
    }
    long[] all = new long[callers * each];
    int n = 0;
    for (long[] v : per) {
      assertIncreasing(v);
      System.arraycopy(v, 0, all, n, v.length);
      n += v.length;
    }
    Arrays.sort(all);
    for (int i = 1; i < all.length; i++) assertTrue(all[i] != all[i - 1], "timestamp " + all[i] + " twice");
    assertEquals(1, fleet.stat(leader, "tso", "max_in_flight"));
    long requests = fleet.stat(leader, "tso", "requests");
    assertTrue(requests * 2 <= callers * each, requests + " requests for " + callers * each + " calls");
  }

  @Test
  void callersArrivingDuringARequestShareTheNext() throws Exception {
    int leader = fleet.tsoLeader();
    try (FlurryClient c = FlurryClient.builder().endpoints(fleet.endpoints.get(leader)).build()) {
      c.tso();
      fleet.resetStats();
      fleet.control(leader, "delay?ms=1000&count=1");
      ExecutorService one = Executors.newSingleThreadExecutor();
      try {
        Future<Long> held = one.submit(c::tso);
        Thread.sleep(200); // the held request is at the proxy now
        List<long[]> late = inParallel(8, 1, c);
        long first = held.get(30, TimeUnit.SECONDS);
        assertEquals(2, fleet.stat(leader, "tso", "requests"), "the held request, then one for the 8 callers");
        long[] v = late.stream().mapToLong(a -> a[0]).sorted().toArray();
        assertEquals(8, Arrays.stream(v).distinct().count());
        assertTrue(v[0] > first, "no late caller takes from the held request");
        assertEquals(7, v[7] - v[0], "one grant of 8 consecutive values");
      } finally {
        one.shutdownNow();
      }
    }
  }

  @Test
  void followsTheRedirectAndKeepsTheLeader() throws Exception {
    int follower = 1 - fleet.tsoLeader();
    long[] values = new long[100];
    try (FlurryClient c = FlurryClient.builder().endpoints(fleet.endpoints.get(follower)).build()) {
      for (int i = 0; i < values.length; i++) values[i] = c.tso();
    }
    assertIncreasing(values);
    assertEquals(1, fleet.stat(follower, "tso", "requests"), "only the first request reached the follower");
  }

  @Test
  void afterTheLeaderDiesGoesBackToTheEndpoints() throws Exception {
    int leader = fleet.tsoLeader();
    int follower = 1 - leader;
    try (FlurryClient c = FlurryClient.builder().endpoints(fleet.endpoints.get(follower))
        .timeout(Duration.ofMinutes(1)).build()) {
      long before = c.tso(); // redirected: the client now asks the leader directly
      fleet.control(leader, "kill");
      long after = c.tso(); // refused by the dead leader: the follower, until it leads
      assertTrue(after > before, after + " after " + before);
      assertEquals(follower, fleet.tsoLeader());
    }
  }
}
