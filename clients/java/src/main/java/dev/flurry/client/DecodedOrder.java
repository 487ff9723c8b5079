package dev.flurry.client;

import java.util.Objects;
import java.util.Optional;

/**
 * The server's decode of an order number ({@code GET /v1/order-numbers/{code}}; docs/clients.md,
 * "Order numbers"): a snowflake ID with its fields, or a segment tag's number with the tag.
 *
 * @param orderNumber the order number as the server read it
 * @param keyVersion the version of the key that decodes it ({@code "1"})
 * @param source what the number stands for
 * @param id the snowflake ID, or the tag's number (an unsigned 64-bit value, as IDs are)
 * @param tag the segment tag; present only for {@link Source#SEGMENT}
 * @param decoded the ID's fields and time as {@link FlurryClient#decode(long)} gives them; present
 *     only for {@link Source#SNOWFLAKE}
 */
public record DecodedOrder(String orderNumber, String keyVersion, Source source, long id, Optional<String> tag,
                           Optional<DecodedId> decoded) {
  /** What an order number stands for. */
  public enum Source {
    /** A snowflake ID: {@link #decoded()} is present. */
    SNOWFLAKE,
    /** A segment tag's number: {@link #tag()} is present. */
    SEGMENT
  }

  /** Checks that exactly the variant's part is present. */
  public DecodedOrder {
    Objects.requireNonNull(orderNumber, "orderNumber");
    Objects.requireNonNull(keyVersion, "keyVersion");
    Objects.requireNonNull(source, "source");
    Objects.requireNonNull(tag, "tag");
    Objects.requireNonNull(decoded, "decoded");
    if (tag.isPresent() != (source == Source.SEGMENT) || decoded.isPresent() != (source == Source.SNOWFLAKE)) {
      throw new IllegalArgumentException("a " + source + " order number has " + (source == Source.SEGMENT
          ? "a tag and no decoded ID" : "a decoded ID and no tag"));
    }
  }

  /**
   * Reads a {@code GET /v1/order-numbers/{code}} answer; {@code layout} decodes a snowflake
   * number's ID and is asked only for one.
   *
   * @throws FlurryException UNKNOWN quoting an answer that does not fit
   */
  static DecodedOrder fromAnswer(String body, java.util.function.Supplier<Layout> layout) {
    java.util.Map<String, Object> o;
    try {
      o = Json.parseObject(body);
    } catch (RuntimeException e) { // Json.ParseException, or not an object
      throw bad("that is not a JSON object", body);
    }
    for (String key : new String[] {"order_number", "key_version", "source", "id"}) {
      if (!(o.get(key) instanceof String)) throw bad("without \"" + key + "\" as text", body);
    }
    String text = (String) o.get("id");
    long id;
    try {
      if (text.isEmpty() || !text.chars().allMatch(c -> c >= '0' && c <= '9')) throw new NumberFormatException();
      id = Long.parseUnsignedLong(text);
    } catch (NumberFormatException e) {
      throw bad("whose id is not a decimal number below 2^64", body);
    }
    String orderNumber = (String) o.get("order_number");
    String keyVersion = (String) o.get("key_version");
    switch ((String) o.get("source")) {
      case "segment": {
        Object tag = o.get("tag");
        if (!(tag instanceof String) || ((String) tag).isEmpty()) throw bad("of a segment number without its tag", body);
        return new DecodedOrder(orderNumber, keyVersion, Source.SEGMENT, id, Optional.of((String) tag), Optional.empty());
      }
      case "snowflake": {
        DecodedId d;
        try {
          d = layout.get().decode(id);
        } catch (FlurryException e) {
          if (!"INVALID_ARGUMENT".equals(e.code())) throw e;
          throw bad("whose id the layout cannot have made (" + e.getMessage() + ")", body);
        }
        return new DecodedOrder(orderNumber, keyVersion, Source.SNOWFLAKE, id, Optional.empty(), Optional.of(d));
      }
      default:
        throw bad("whose source is neither snowflake nor segment", body);
    }
  }

  private static FlurryException bad(String why, String body) {
    String start = body.length() > 200 ? body.substring(0, 200) : body;
    return new FlurryException("UNKNOWN", "an order-number answer " + why + ": \"" + start + "\"");
  }
}
