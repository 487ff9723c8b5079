package dev.flurry.client;

import java.time.Instant;
import java.time.ZoneOffset;
import java.time.format.DateTimeFormatter;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.OptionalLong;

/**
 * A server's ID layout as {@code GET /v1/layout} gives it, and the local decoder built from it.
 * Immutable and thread-safe.
 */
public final class Layout {
  private static final DateTimeFormatter ISO_MS =
      DateTimeFormatter.ofPattern("uuuu-MM-dd'T'HH:mm:ss.SSS'Z'").withZone(ZoneOffset.UTC);

  private record FieldSpec(String name, int bits, int shift, String kind) {}

  private final int bits;
  private final List<FieldSpec> fields;
  private final long epochUnixMs;
  private final long unitNs;
  private final long maxBatch;
  private final String text;

  private Layout(int bits, List<FieldSpec> fields, long epochUnixMs, long unitNs, long maxBatch, String text) {
    this.bits = bits;
    this.fields = fields;
    this.epochUnixMs = epochUnixMs;
    this.unitNs = unitNs;
    this.maxBatch = maxBatch;
    this.text = text;
  }

  /** Reads the layout from /v1/layout's JSON object; a missing or mistyped member is refused. */
  public static Layout fromJson(Map<String, Object> o) {
    List<FieldSpec> fields = new ArrayList<>();
    Object fs = o.get("fields");
    if (!(fs instanceof List)) throw new IllegalArgumentException("layout: \"fields\" is not an array");
    for (Object f : (List<?>) fs) {
      if (!(f instanceof Map)) throw new IllegalArgumentException("layout: a field is not an object");
      @SuppressWarnings("unchecked")
      Map<String, Object> m = (Map<String, Object>) f;
      fields.add(new FieldSpec(str(m, "name"), (int) num(m, "bits"), (int) num(m, "shift"), str(m, "kind")));
    }
    long maxBatch = o.get("max_batch") instanceof Long ? (Long) o.get("max_batch") : 100000;
    return new Layout((int) num(o, "bits"), List.copyOf(fields), num(o, "epoch_unix_ms"), num(o, "unit_ns"),
        maxBatch, o.get("text") instanceof String ? (String) o.get("text") : "");
  }

  private static long num(Map<String, Object> m, String key) {
    Object v = m.get(key);
    if (!(v instanceof Long)) throw new IllegalArgumentException("layout: \"" + key + "\" is not an integer");
    return (Long) v;
  }

  private static String str(Map<String, Object> m, String key) {
    Object v = m.get(key);
    if (!(v instanceof String)) throw new IllegalArgumentException("layout: \"" + key + "\" is not a string");
    return (String) v;
  }

  /** The server's largest batch (count of one /v1/ids request). */
  public long maxBatch() {
    return maxBatch;
  }

  /** The layout's text, e.g. {@code time:41@1ms,node:10,seq:12;epoch=...}. */
  public String text() {
    return text;
  }

  /**
   * Decodes an ID given as plain decimal digits below 2^64.
   *
   * @throws FlurryException INVALID_ARGUMENT for other text, or bits set at or above the layout's
   */
  public DecodedId decode(String id) {
    if (id == null || id.isEmpty() || id.length() > 20) throw badText(id);
    for (int i = 0; i < id.length(); i++) {
      if (id.charAt(i) < '0' || id.charAt(i) > '9') throw badText(id);
    }
    long v;
    try {
      v = Long.parseUnsignedLong(id);
    } catch (NumberFormatException tooLarge) {
      throw badText(id);
    }
    return decode(v, id);
  }

  private static FlurryException badText(String id) {
    return FlurryException.invalidArgument("ID \"" + id + "\" is not a decimal number below 2^64");
  }

  /** Decodes an ID (a negative long is an ID at or above 2^63, refused by every layout). */
  public DecodedId decode(long id) {
    return decode(id, Long.toUnsignedString(id));
  }

  private DecodedId decode(long id, String text) {
    if (bits < 64 && (id >>> bits) != 0) {
      throw FlurryException.invalidArgument("ID " + text + " has bits set at or above the layout's " + bits);
    }
    long ticks = 0, node = 0, seq = 0;
    boolean hasClock = false;
    long clock = 0;
    List<DecodedId.Field> values = new ArrayList<>(fields.size());
    for (FieldSpec f : fields) {
      long value = (id >>> f.shift) & (f.bits >= 64 ? -1L : (1L << f.bits) - 1);
      values.add(new DecodedId.Field(f.name, value));
      switch (f.kind) {
        case "time" -> ticks = value;
        case "node" -> node = (node << f.bits) | value;
        case "seq" -> seq = value;
        case "clock" -> {
          hasClock = true;
          clock = value;
        }
        default -> {}
      }
    }
    long ns = saturatedTimeNs(ticks);
    long unixMs = Math.floorDiv(ns, 1_000_000L);
    String time = ISO_MS.format(Instant.ofEpochMilli(unixMs));
    return new DecodedId(id, time, unixMs, ticks, node, seq, hasClock ? OptionalLong.of(clock) : OptionalLong.empty(),
        List.copyOf(values));
  }

  /** epoch_unix_ms × 10^6 + ticks × unit_ns nanoseconds, saturated at 2^63 − 1 as the server does. */
  private long saturatedTimeNs(long ticks) {
    try {
      return Math.addExact(Math.multiplyExact(epochUnixMs, 1_000_000L), Math.multiplyExact(ticks, unitNs));
    } catch (ArithmeticException overflow) {
      return Long.MAX_VALUE;
    }
  }
}
