package dev.flurry.client;

import java.util.Map;
import java.util.concurrent.locks.Condition;
import java.util.concurrent.locks.ReentrantLock;

/**
 * One segment tag's numbers: handed out from a range the client holds, the next range fetched in
 * the background (one fetch in flight per tag) once {@code segmentPrefetch} of the current one
 * is used. Thread-safe; get it from {@link FlurryClient#segment(String)}.
 */
public final class Segment {
  private static final class Range {
    long next;
    final long end;
    final long delta;
    final long size;
    long used;

    Range(long start, long end, long delta) {
      this.next = start;
      this.end = end;
      this.delta = delta;
      this.size = end > start ? (end - start + delta - 1) / delta : 0;
    }
  }

  private final FlurryClient client;
  private final String tag;
  private final ReentrantLock lock = new ReentrantLock();
  private final Condition changed = lock.newCondition();
  private Range current;
  private Range following;
  private boolean fetching;
  private long fetchSeq;
  private long failedSeq = -1;
  private FlurryException failedError;

  Segment(FlurryClient client, String tag) {
    this.client = client;
    this.tag = tag;
  }

  /** The tag's name. */
  public String tag() {
    return tag;
  }

  /**
   * The tag's next number: once each, in order within a range.
   *
   * @throws FlurryException NOT_FOUND for an unknown tag, OUT_OF_RANGE when segmentRange is
   *     larger than the tag's range, DEADLINE_EXCEEDED after {@code timeout}; none retried
   */
  public long next() {
    client.checkOpen();
    long deadline = client.ticker.nanoTime() + client.timeoutNanos;
    lock.lock();
    try {
      long waitingOn = -1;
      while (true) {
        client.checkOpen();
        Range r = current;
        if (r != null && r.next < r.end) {
          long v = r.next;
          r.next += r.delta;
          r.used++;
          if (following == null && r.used >= client.segmentPrefetch * r.size) startFetch(deadline);
          return v;
        }
        if (following != null) {
          current = following;
          following = null;
          continue;
        }
        if (waitingOn >= 0 && failedSeq == waitingOn) throw failedError;
        startFetch(deadline);
        waitingOn = fetchSeq;
        long left = deadline - client.ticker.nanoTime();
        if (left <= 0) throw new FlurryException("DEADLINE_EXCEEDED", "no segment number for \"" + tag + "\" within the timeout");
        changed.awaitNanos(left);
      }
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      throw new FlurryException("CANCELLED", "interrupted while waiting for a segment range");
    } finally {
      lock.unlock();
    }
  }

  /** Starts one background range fetch unless one runs; lock held. */
  private void startFetch(long deadline) {
    if (fetching || client.closed) return;
    fetching = true;
    long seq = ++fetchSeq;
    client.background.execute(() -> fetch(seq, deadline));
  }

  private void fetch(long seq, long deadline) {
    Range r = null;
    FlurryException error = null;
    try {
      Transport.Answer a = client.transport.get("/v1/segments/" + tag + "/range?size=" + client.segmentRange, deadline);
      Map<String, Object> o = FlurryClient.parseJson(a);
      try {
        long start = Long.parseLong((String) o.get("start"));
        long end = Long.parseLong((String) o.get("end"));
        long delta = (Long) o.get("delta");
        if (delta < 1) throw new IllegalArgumentException("delta " + delta);
        r = new Range(start, end, delta);
      } catch (RuntimeException bad) {
        throw new FlurryException("UNKNOWN", "", "bad range answer: " + a.text(), a.status(), null, a.endpoint());
      }
    } catch (FlurryException e) {
      error = e;
    } catch (RuntimeException e) {
      error = new FlurryException("INTERNAL", "the range fetch failed: " + e);
    }
    lock.lock();
    try {
      fetching = false;
      if (error != null) {
        failedSeq = seq;
        failedError = error;
      } else if (current == null || current.next >= current.end) {
        current = r;
      } else {
        following = r;
      }
      changed.signalAll();
    } finally {
      lock.unlock();
    }
  }

  void wake() {
    lock.lock();
    try {
      changed.signalAll();
    } finally {
      lock.unlock();
    }
  }
}
