package dev.flurry.client;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Duration;
import java.util.function.UnaryOperator;
import org.junit.jupiter.api.Test;

/** h. Settings are validated once, at build(), with an error naming the setting. */
class SettingsTest {
  private static void refused(String setting, UnaryOperator<FlurryClient.Builder> bad) {
    IllegalArgumentException e = assertThrows(IllegalArgumentException.class,
        () -> bad.apply(FlurryClient.builder().endpoints("http://127.0.0.1:7609")).build(), setting);
    assertTrue(e instanceof FlurrySettingsException, setting + ": " + e);
    assertEquals(setting, ((FlurrySettingsException) e).setting());
    assertTrue(e.getMessage().startsWith(setting + ": "), setting + ": " + e.getMessage());
  }

  @Test
  void badSettingsAreRefusedByName() {
    refused("endpoints", b -> b.endpoints());
    refused("endpoints", b -> b.endpoints("ftp://127.0.0.1:7609"));
    refused("endpoints", b -> b.endpoints("127.0.0.1:7609"));
    refused("endpoints", b -> b.endpoints("http://a b"));
    refused("maxAge", b -> b.maxAge(Duration.ZERO));
    refused("maxAge", b -> b.maxAge(Duration.ofMillis(-1)));
    refused("timeout", b -> b.timeout(Duration.ZERO));
    refused("minBatch", b -> b.minBatch(0));
    refused("minBatch", b -> b.minBatch(512).maxBatch(256));
    refused("lowWater", b -> b.lowWater(0));
    refused("lowWater", b -> b.lowWater(1));
    refused("lowWater", b -> b.lowWater(Double.NaN));
    refused("segmentRange", b -> b.segmentRange(0));
    refused("segmentPrefetch", b -> b.segmentPrefetch(0));
    refused("segmentPrefetch", b -> b.segmentPrefetch(1.5));
    refused("endpoints", b -> b.endpoints("http://a:1", null));
    refused("token", b -> b.token(""));
    refused("token", b -> b.token("a\nb"));
  }

  @Test
  void goodSettingsMakeAClientWithoutIo() {
    FlurryClient.builder().endpoints("http://127.0.0.1:1", "https://example.com:7609/").maxAge(Duration.ofMillis(1))
        .minBatch(1).maxBatch(1).lowWater(0.01).segmentPrefetch(0.99).build().close();
  }

  @Test
  void badTagsAreRefusedLocally() {
    try (FlurryClient c = FlurryClient.builder().endpoints("http://127.0.0.1:1").build()) {
      for (String tag : new String[] {"", "a/b", "a b", "é", "x".repeat(129)}) {
        assertTrue("INVALID_ARGUMENT".equals(assertThrows(FlurryException.class, () -> c.segment(tag)).code()));
      }
    }
  }
}
