package dev.flurry.client;

import java.nio.ByteBuffer;
import java.util.Arrays;
import java.util.List;
import java.util.concurrent.Flow;

/**
 * Parses a format=text body (one decimal ID per line) as its bytes arrive, so parsing overlaps
 * the transfer and the body is never copied whole. {@link #result()} is the IDs, or a String
 * saying what was wrong.
 */
final class IdsParser implements Flow.Subscriber<List<ByteBuffer>> {
  private long[] ids;
  private int n;
  private long value;
  private int digits;
  private String error;
  private long offset;

  IdsParser(int expected) {
    ids = new long[Math.max(1, expected)];
  }

  @Override
  public void onSubscribe(Flow.Subscription s) {
    s.request(Long.MAX_VALUE);
  }

  @Override
  public void onNext(List<ByteBuffer> buffers) {
    for (ByteBuffer b : buffers) {
      if (error != null) return;
      int end = b.limit();
      for (int i = b.position(); i < end; i++) {
        byte c = b.get(i);
        if (c >= '0' && c <= '9') {
          value = value * 10 + (c - '0');
          if (++digits > 19) {
            error = "a number longer than 19 digits at byte " + (offset + i - b.position());
            break;
          }
        } else if (c == '\n') {
          if (!endNumber()) {
            error = "an empty line at byte " + (offset + i - b.position());
            break;
          }
        } else if (c != '\r') {
          error = String.format("byte 0x%02x at %d is not a digit or a line end", c & 0xff, offset + i - b.position());
          break;
        }
      }
      offset += end - b.position();
      b.position(end);
    }
  }

  private boolean endNumber() {
    if (digits == 0) return false;
    if (n == ids.length) ids = Arrays.copyOf(ids, ids.length * 2);
    ids[n++] = value;
    value = 0;
    digits = 0;
    return true;
  }

  @Override
  public void onError(Throwable t) {
    // The HTTP client fails the response itself.
  }

  @Override
  public void onComplete() {
    if (error == null && digits > 0) endNumber();
  }

  /** The IDs parsed, or a String describing the first fault. */
  Object result() {
    if (error != null) return error;
    if (n == 0) return "no IDs in the body";
    return n == ids.length ? ids : Arrays.copyOf(ids, n);
  }
}
