package dev.flurry.client;

import java.util.List;
import java.util.OptionalLong;

/**
 * An ID's fields, decoded locally from the server's layout exactly as the server decodes them.
 *
 * @param id the ID (below 2^63 in every layout)
 * @param time the time in UTC as ISO-8601 with milliseconds, e.g. {@code 2026-11-26T16:58:55.972Z}
 * @param unixMs the time in whole milliseconds since the Unix epoch (rounded down)
 * @param ticks the raw value of the time field
 * @param node the node fields together, the first one most significant
 * @param seq the sequence field
 * @param clock the clock field, present only in layouts that have one
 * @param fields every field of the layout by name, in the layout's order
 */
public record DecodedId(long id, String time, long unixMs, long ticks, long node, long seq,
                        OptionalLong clock, List<Field> fields) {
  /** One field of the layout and its value in the ID. */
  public record Field(String name, long value) {}
}
