package dev.flurry.client;

/**
 * The refill size rule (docs/clients.md, "Batch size adapts"): the first refill asks for
 * min_batch; a later one doubles after the buffer ran low, halves after IDs expired, always
 * within [min(min_batch, hi), hi] where hi = min(max_batch, the server's max_batch).
 */
public final class BatchSizer {
  private BatchSizer() {}

  /** What happened since the previous refill. */
  public enum Event { FIRST, LOW, EXPIRED }

  /** The size of the refill after {@code event}, given the previous size. */
  public static int next(Event event, int previous, int minBatch, int maxBatch, long serverMaxBatch) {
    int hi = (int) Math.min(maxBatch, serverMaxBatch);
    int lo = Math.min(minBatch, hi);
    switch (event) {
      case FIRST:
        return lo;
      case LOW:
        return (int) Math.min((long) previous * 2, hi);
      default:
        return Math.max(previous / 2, lo);
    }
  }
}
