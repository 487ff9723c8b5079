package dev.flurry.client;

import java.lang.invoke.MethodHandles;
import java.lang.invoke.VarHandle;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.util.Arrays;
import java.util.List;
import java.util.concurrent.Flow;

/**
 * Parses a format=text body (one decimal ID per line) as its bytes arrive, so parsing overlaps
 * the transfer and the body is never held whole (each chunk is copied once into a scratch
 * array). {@link #result()} is the IDs, or a String saying what was wrong. One instance per
 * response; the HTTP client calls it from one thread at a time.
 */
final class IdsParser implements Flow.Subscriber<List<ByteBuffer>> {
  private long[] ids;
  private int n;
  private long value;
  private int digits;
  private String error;
  private long offset;
  private byte[] scratch = new byte[16384];
  /** The digits of the last line (0 before the first): the next is likely as long. */
  private int width;
  private static final VarHandle LONGS = MethodHandles.byteArrayViewVarHandle(long[].class, ByteOrder.LITTLE_ENDIAN);

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
      int length = b.remaining();
      // The HTTP client hands over read-only buffers: one bulk copy into an array, then a
      // plain array loop, is several times faster than get(i) on the buffer byte by byte.
      byte[] bytes;
      int from;
      if (b.hasArray()) {
        bytes = b.array();
        from = b.arrayOffset() + b.position();
      } else {
        if (scratch.length < length) scratch = new byte[length];
        b.get(b.position(), scratch, 0, length);
        bytes = scratch;
        from = 0;
      }
      parse(bytes, from, from + length);
      offset += length;
      b.position(b.limit());
    }
  }

  /**
   * Parses bytes[from, to) with the state in locals (the hot loop), then stores it back. A line
   * as long as the one before (IDs of one batch have the same length), whole in this chunk, is
   * read eight digits at a time; anything else, digit by digit.
   */
  private void parse(byte[] bytes, int from, int to) {
    long v = value;
    int d = digits;
    long[] out = ids;
    int count = n;
    int w = width;
    int i = from;
    while (i < to) {
      if (d == 0 && w >= 16 && i + w < to && bytes[i + w] == '\n') {
        long x = digits16to19(bytes, i, i + w);
        if (x != NOT_DIGITS) {
          if (count == out.length) out = Arrays.copyOf(out, out.length * 2);
          out[count++] = x;
          i += w + 1;
          continue;
        }
      }
      int c = bytes[i] - '0';
      if (c >= 0 && c <= 9) {
        v = v * 10 + c;
        if (++d > 19) {
          error = "a number longer than 19 digits at byte " + (offset + i - from);
          break;
        }
      } else if (c == '\n' - '0') {
        if (d == 0) {
          error = "an empty line at byte " + (offset + i - from);
          break;
        }
        if (count == out.length) out = Arrays.copyOf(out, out.length * 2);
        out[count++] = v;
        w = d;
        v = 0;
        d = 0;
      } else if (c != '\r' - '0') {
        error = String.format("byte 0x%02x at %d is not a digit or a line end", bytes[i] & 0xff, offset + i - from);
        break;
      }
      i++;
    }
    value = v;
    digits = d;
    ids = out;
    n = count;
    width = w;
  }

  /** Marks a line that is not all digits: 2^64 - 1 has 20 digits, so no 16-to-19-digit line reads as it. */
  private static final long NOT_DIGITS = -1;

  /** The number in bytes[from, end) (16 to 19 digits), or NOT_DIGITS. */
  private static long digits16to19(byte[] bytes, int from, int end) {
    long hi = (long) LONGS.get(bytes, from);
    long lo = (long) LONGS.get(bytes, from + 8);
    if (!eightDigits(hi) || !eightDigits(lo)) return NOT_DIGITS;
    long x = eightDigitsValue(hi) * 100_000_000L + eightDigitsValue(lo);
    int k = end - from - 16; // 0 to 3 digits left
    if (k == 0) return x;
    if (from + 24 <= bytes.length) {
      // The last k digits as a third word: moved to its top bytes, '0's shifted in below them.
      int shift = (8 - k) * 8;
      long tail = ((long) LONGS.get(bytes, from + 16) << shift) | (0x3030303030303030L >>> (64 - shift));
      if (!eightDigits(tail)) return NOT_DIGITS;
      return x * POWERS_OF_TEN[k] + eightDigitsValue(tail);
    }
    for (int j = from + 16; j < end; j++) {
      int c = bytes[j] - '0';
      if (c < 0 || c > 9) return NOT_DIGITS;
      x = x * 10 + c;
    }
    return x;
  }

  private static final long[] POWERS_OF_TEN = {1, 10, 100, 1000};

  /** Whether all 8 bytes of w are '0'..'9'. */
  private static boolean eightDigits(long w) {
    return ((w & 0xF0F0F0F0F0F0F0F0L) | (((w + 0x0606060606060606L) & 0xF0F0F0F0F0F0F0F0L) >>> 4)) == 0x3333333333333333L;
  }

  /** The value of 8 ASCII digits, the first in the lowest byte. */
  private static long eightDigitsValue(long w) {
    w = (w & 0x0F0F0F0F0F0F0F0FL) * 2561 >>> 8;
    w = (w & 0x00FF00FF00FF00FFL) * 6553601 >>> 16;
    return (w & 0x0000FFFF0000FFFFL) * 42949672960001L >>> 32;
  }

  private void endNumber() {
    if (n == ids.length) ids = Arrays.copyOf(ids, ids.length * 2);
    ids[n++] = value;
    value = 0;
    digits = 0;
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
