package dev.flurry.client;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;

import java.io.IOException;
import java.net.ConnectException;
import java.nio.charset.StandardCharsets;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.Deque;
import java.util.List;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.Test;

/** The retry loop with scripted answers and a fake clock: nothing sleeps. */
class RetryTest {
  private static final List<String> TWO = List.of("http://a", "http://b");
  private final long[] now = {0};
  private final List<Long> sleeps = new ArrayList<>();
  private final List<String> tried = new ArrayList<>();
  private final AtomicInteger preferred = new AtomicInteger();

  /** An answer per attempt, in order; null = connection refused. */
  private Transport.Attempt script(Object... answers) {
    Deque<Object> q = new ArrayDeque<>(List.of(answers));
    return (index, timeout) -> {
      tried.add(TWO.get(index));
      Object a = q.removeFirst();
      if (a instanceof String && a.equals("refused")) throw new ConnectException("refused");
      Object[] s = (Object[]) a;
      String body = (String) s[2];
      return new Transport.Answer((Integer) s[0], (String) s[1], body.getBytes(StandardCharsets.UTF_8), null, TWO.get(index), now[0]);
    };
  }

  private static Object[] answer(int status, String retryAfter, String body) {
    return new Object[] {status, retryAfter, body};
  }

  private static final String UNAVAILABLE = "{\"error\":{\"code\":\"UNAVAILABLE\",\"reason\":\"LEASE_EXPIRING\",\"message\":\"m\"}}";
  private static final String LOST = "{\"error\":{\"code\":\"FAILED_PRECONDITION\",\"reason\":\"LEASE_LOST\",\"message\":\"m\"}}";

  private Transport.Answer run(Transport.Attempt a, long deadline, double u) {
    return Transport.run(TWO, a, preferred, deadline, () -> now[0], nanos -> {
      sleeps.add(nanos);
      now[0] += nanos;
    }, () -> u);
  }

  @Test
  void retryAnswersGoRoundTheEndpointsThenWaitTheLargestRetryAfter() {
    Transport.Answer a = run(script(answer(503, "1", UNAVAILABLE), answer(503, "2", UNAVAILABLE), "refused",
        "refused", answer(200, null, "1\n")), 10_000_000_000L, 0.5);
    assertEquals(200, a.status());
    assertEquals(List.of("http://a", "http://b", "http://a", "http://b", "http://a"), tried);
    // round 0: max(2 s, 0.1 s) × 1.1; round 1: max(0, 0.2 s) × 1.1
    assertEquals(List.of(2_200_000_000L, 220_000_000L), sleeps);
    assertEquals(0, preferred.get(), "the endpoint that answered is tried first next time");
  }

  @Test
  void failoverTakesTheEndpointOutOfTheCall() {
    Transport.Answer a = run(script(answer(503, null, LOST), "refused", answer(200, null, "1\n")), 10_000_000_000L, 0);
    assertEquals(List.of("http://a", "http://b", "http://b"), tried);
    assertEquals(List.of(100_000_000L), sleeps);
    assertEquals("http://b", a.endpoint());
    assertEquals(1, preferred.get());
  }

  @Test
  void everyEndpointOutRaisesTheLastAnswer() {
    FlurryException e = assertThrows(FlurryException.class,
        () -> run(script(answer(503, null, LOST), answer(502, null, "<html>")), 10_000_000_000L, 0));
    assertEquals("UNAVAILABLE", e.code());
    assertEquals(502, e.httpStatus());
    assertEquals("http://b", e.endpoint());
    assertEquals(List.of(), sleeps);
  }

  @Test
  void fatalIsRaisedAtOnce() {
    FlurryException e = assertThrows(FlurryException.class, () -> run(script((Object) answer(404, null,
        "{\"error\":{\"code\":\"NOT_FOUND\",\"message\":\"no\"}}")), 10_000_000_000L, 0));
    assertEquals("NOT_FOUND", e.code());
    assertEquals(List.of("http://a"), tried);
  }

  @Test
  void aWaitPastTheDeadlineRaisesTheLastErrorAtOnce() {
    FlurryException e = assertThrows(FlurryException.class,
        () -> run(script(answer(503, "1", UNAVAILABLE), answer(503, "1", UNAVAILABLE)), 500_000_000L, 0));
    assertEquals("LEASE_EXPIRING", e.reason());
    assertEquals(List.of(), sleeps);
  }

  @Test
  void noAnswerBeforeTheDeadlineIsDeadlineExceeded() {
    Transport.Attempt slowRefusal = (index, timeout) -> {
      now[0] += 300_000_000L;
      throw new IOException("reset");
    };
    FlurryException e = assertThrows(FlurryException.class, () -> run(slowRefusal, 1_000_000_000L, 0));
    assertEquals("DEADLINE_EXCEEDED", e.code());
    assertEquals(0, e.httpStatus());
  }
}
