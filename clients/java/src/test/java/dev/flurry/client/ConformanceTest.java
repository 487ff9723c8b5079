package dev.flurry.client;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/** clients/conformance/cases.json: the suite every flurry client passes. */
class ConformanceTest {
  private static Map<String, Object> cases;

  @BeforeAll
  static void load() throws IOException {
    String path = System.getenv("FLURRY_CONFORMANCE_CASES");
    Path p = path != null && !path.isEmpty() ? Path.of(path) : Path.of("../conformance/cases.json");
    cases = Json.parseObject(Files.readString(p));
  }

  @SuppressWarnings("unchecked")
  private static List<Map<String, Object>> list(Map<String, Object> o, String key) {
    return (List<Map<String, Object>>) o.get(key);
  }

  @SuppressWarnings("unchecked")
  private static Map<String, Object> obj(Map<String, Object> o, String key) {
    return (Map<String, Object>) o.get(key);
  }

  // Order-number answers become a DecodedOrder: the snowflake variant with the ID decoded as
  // decode() does, the segment variant with its tag; an answer that does not fit is UNKNOWN.
  @Test
  void orderDecodes() {
    Map<String, Layout> layouts = new java.util.HashMap<>();
    for (Map<String, Object> l : list(cases, "layouts")) layouts.put((String) l.get("name"), Layout.fromJson(obj(l, "layout")));
    java.util.Set<DecodedOrder.Source> sources = java.util.EnumSet.noneOf(DecodedOrder.Source.class);
    int bad = 0;
    for (Map<String, Object> c : list(cases, "order_decodes")) {
      String what = (String) c.get("name");
      Layout layout = layouts.get((String) c.get("layout"));
      boolean[] asked = {false};
      java.util.function.Supplier<Layout> get = () -> {
        asked[0] = true;
        return layout;
      };
      if (c.containsKey("expect_error")) {
        FlurryException e = assertThrows(FlurryException.class, () -> DecodedOrder.fromAnswer((String) c.get("answer"), get), what);
        assertEquals(c.get("expect_error"), e.code(), what);
        bad++;
        continue;
      }
      DecodedOrder o = DecodedOrder.fromAnswer((String) c.get("answer"), get);
      Map<String, Object> x = obj(c, "expect");
      assertEquals(x.get("order_number"), o.orderNumber(), what);
      assertEquals(x.get("key_version"), o.keyVersion(), what);
      assertEquals(x.get("source"), o.source().name().toLowerCase(java.util.Locale.ROOT), what);
      assertEquals(Long.parseUnsignedLong((String) x.get("id")), o.id(), what);
      assertEquals(java.util.Optional.ofNullable((String) x.get("tag")), o.tag(), what);
      Map<String, Object> e = obj(x, "decoded");
      assertEquals(e != null, o.decoded().isPresent(), what);
      assertEquals(e != null, asked[0], what + ": the layout is asked for a snowflake number only");
      if (e != null) {
        DecodedId d = o.decoded().orElseThrow();
        assertEquals(layout.decode(o.id()), d, what);
        assertEquals(e.get("time"), d.time(), what);
        assertEquals(e.get("unix_ms"), d.unixMs(), what);
        assertEquals(e.get("ticks"), d.ticks(), what);
        assertEquals(e.get("node"), d.node(), what);
        assertEquals(e.get("seq"), d.seq(), what);
        List<Map<String, Object>> fields = list(e, "fields");
        assertEquals(fields.size(), d.fields().size(), what);
        for (int i = 0; i < fields.size(); i++) {
          assertEquals(fields.get(i).get("name"), d.fields().get(i).name(), what);
          assertEquals(fields.get(i).get("value"), d.fields().get(i).value(), what);
        }
      }
      sources.add(o.source());
    }
    assertEquals(java.util.EnumSet.allOf(DecodedOrder.Source.class), sources);
    assertTrue(bad >= 10, bad + " bad answers");
  }

  @Test
  void decodeVectors() {
    int vectors = 0;
    for (Map<String, Object> l : list(cases, "layouts")) {
      Layout layout = Layout.fromJson(obj(l, "layout"));
      for (Map<String, Object> v : list(l, "decode")) {
        String id = (String) v.get("id");
        String what = l.get("name") + " " + id;
        Map<String, Object> e = obj(v, "expect");
        DecodedId d = layout.decode(id);
        assertEquals(e.get("time"), d.time(), what);
        assertEquals(e.get("unix_ms"), d.unixMs(), what);
        assertEquals(e.get("ticks"), d.ticks(), what);
        assertEquals(e.get("node"), d.node(), what);
        assertEquals(e.get("seq"), d.seq(), what);
        if (e.containsKey("clock")) {
          assertEquals(e.get("clock"), d.clock().orElseThrow(), what);
        } else {
          assertFalse(d.clock().isPresent(), what + ": no clock field");
        }
        List<Map<String, Object>> fields = list(e, "fields");
        assertEquals(fields.size(), d.fields().size(), what);
        for (int i = 0; i < fields.size(); i++) {
          assertEquals(fields.get(i).get("name"), d.fields().get(i).name(), what);
          assertEquals(fields.get(i).get("value"), d.fields().get(i).value(), what);
        }
        if (!id.startsWith("0") || id.equals("0")) assertEquals(d, layout.decode(Long.parseUnsignedLong(id)), what);
        vectors++;
      }
    }
    assertTrue(vectors > 50, vectors + " vectors");
  }

  @Test
  void decodeErrors() {
    for (Map<String, Object> l : list(cases, "layouts")) {
      Layout layout = Layout.fromJson(obj(l, "layout"));
      @SuppressWarnings("unchecked")
      List<String> texts = (List<String>) l.get("decode_errors");
      assertFalse(texts.isEmpty());
      for (String t : texts) {
        FlurryException e = assertThrows(FlurryException.class, () -> layout.decode(t), l.get("name") + " " + t);
        assertEquals("INVALID_ARGUMENT", e.code());
      }
    }
  }

  @Test
  void errors() {
    for (Map<String, Object> c : list(cases, "errors")) {
      String name = (String) c.get("name");
      int status = ((Long) c.get("status")).intValue();
      String ra = (String) c.get("retry_after_header");
      Map<String, Object> e = obj(c, "expect");
      FlurryException got = status == 0 ? Errors.connectionError("http://127.0.0.1:1", "connection refused")
          : Errors.fromAnswer(status, ra, (String) c.get("body"), "http://127.0.0.1:1");
      assertEquals(e.get("code"), got.code(), name);
      assertEquals(e.get("reason"), got.reason(), name);
      if (e.containsKey("message")) assertEquals(e.get("message"), got.getMessage(), name);
      if (e.containsKey("message_prefix")) {
        assertTrue(got.getMessage().startsWith((String) e.get("message_prefix")), name + ": " + got.getMessage());
      }
      Object expectRa = e.get("retry_after");
      assertEquals(expectRa == null ? null : Duration.ofSeconds((Long) expectRa), got.retryAfter().orElse(null), name);
      assertEquals(status, got.httpStatus(), name);
      String action = Errors.action(status, ra != null).name().toLowerCase();
      assertEquals(e.get("action"), action, name);
    }
  }

  @Test
  void retryWaits() {
    for (Map<String, Object> c : list(cases, "retry_waits")) {
      Object ra = c.get("retry_after");
      double got = Errors.retryWaitSeconds(((Long) c.get("round")).intValue(),
          ra == null ? 0 : ((Number) ra).doubleValue(), ((Number) c.get("u")).doubleValue());
      assertEquals(((Number) c.get("wait")).doubleValue(), got, 1e-9, c.toString());
    }
  }

  @Test
  @SuppressWarnings("unchecked")
  void tsoAnswersAndLocations() {
    Map<String, Object> tso = (Map<String, Object>) cases.get("tso");
    for (Map<String, Object> c : list(tso, "grants")) {
      Transport.Answer a = new Transport.Answer(200, null,
          ((String) c.get("body")).getBytes(java.nio.charset.StandardCharsets.UTF_8), null, "e", 0);
      int count = ((Long) c.get("count")).intValue();
      Map<String, Object> expect = (Map<String, Object>) c.get("expect");
      if (expect.containsKey("first")) {
        assertEquals(Long.parseUnsignedLong((String) expect.get("first")), FlurryClient.parseTso(a, count),
            (String) c.get("name"));
      } else {
        FlurryException e = assertThrows(FlurryException.class, () -> FlurryClient.parseTso(a, count),
            (String) c.get("name"));
        assertEquals(expect.get("code"), e.code(), (String) c.get("name"));
      }
    }
    for (Map<String, Object> c : list(tso, "leaders")) {
      assertEquals(c.get("leader"), FlurryClient.leaderBase((String) c.get("location")), (String) c.get("location"));
    }
  }

  @Test
  void batchSizes() {
    for (Map<String, Object> c : list(cases, "batch_sizes")) {
      int min = ((Long) c.get("min_batch")).intValue();
      int max = ((Long) c.get("max_batch")).intValue();
      long server = (Long) c.get("server_max_batch");
      @SuppressWarnings("unchecked")
      List<String> events = (List<String>) c.get("events");
      @SuppressWarnings("unchecked")
      List<Long> expect = (List<Long>) c.get("expect");
      int size = 0;
      for (int i = 0; i < events.size(); i++) {
        size = BatchSizer.next(BatchSizer.Event.valueOf(events.get(i).toUpperCase()), size, min, max, server);
        assertEquals(expect.get(i).intValue(), size, c + " step " + i);
      }
    }
  }
}
