package dev.flurry.client;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.math.BigInteger;
import java.util.Arrays;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;

class JsonTest {
  @Test
  void readsEveryKindOfValue() {
    Map<String, Object> o = Json.parseObject(
        " {\"a\":1,\"b\":-2.5e1,\"c\":\"x\\\"\\\\\\/\\b\\f\\n\\r\\t\\u00e9\\ud83d\\ude00\",\"d\":[true,false,null,[]],"
            + "\"e\":{},\"f\":18446744073709551616,\"g\":0,\"h\":-0.5} ");
    assertEquals(1L, o.get("a"));
    assertEquals(-25.0, o.get("b"));
    assertEquals("x\"\\/\b\f\n\r\té\uD83D\uDE00", o.get("c"));
    assertEquals(Arrays.asList(true, false, null, List.of()), o.get("d"));
    assertEquals(Map.of(), o.get("e"));
    assertEquals(new BigInteger("18446744073709551616"), o.get("f"));
    assertEquals(0L, o.get("g"));
    assertEquals(-0.5, o.get("h"));
    assertEquals(List.of("a", "b", "c", "d", "e", "f", "g", "h"), List.copyOf(o.keySet()), "keys in order");
    assertEquals(Long.MAX_VALUE, Json.parse("9223372036854775807"));
  }

  private static void refused(String text, String what, int offset) {
    Json.ParseException e = assertThrows(Json.ParseException.class, () -> Json.parse(text), text);
    assertTrue(e.getMessage().contains(what), text + ": " + e.getMessage());
    assertTrue(e.getMessage().endsWith("at offset " + offset), text + ": " + e.getMessage());
    assertEquals(offset, e.offset());
  }

  @Test
  void refusesGarbageSayingWhatAndWhere() {
    refused("", "expected a value, found end of text", 0);
    refused("{\"a\":1,}", "expected a string key, found '}'", 7);
    refused("{\"a\" 1}", "expected ':', found '1'", 5);
    refused("[1 2]", "expected ',' or ']', found '2'", 3);
    refused("{\"a\":1 \"b\":2}", "expected ',' or '}', found '\"'", 7);
    refused("01", "leading zero", 1);
    refused("1.", "expected a digit after '.'", 2);
    refused("1e", "expected a digit in the exponent", 2);
    refused("-", "expected a digit", 1);
    refused("+1", "expected a value, found '+'", 0);
    refused("\"abc", "unterminated string", 4);
    refused("\"a\tb\"", "control character U+0009", 2);
    refused("\"\\x\"", "invalid escape \\x", 2);
    refused("\"\\u12G4\"", "expected a hex digit", 5);
    refused("tru", "expected a value", 0);
    refused("nul", "expected a value", 0);
    refused("{} x", "unexpected 'x' after the value", 3);
    refused("[1]]", "unexpected ']' after the value", 3);
    refused("{\"a\":1,\"a\":2}", "repeated key \"a\"", 7);
    refused("NaN", "expected a value, found 'N'", 0);
    refused("[" .repeat(300), "nesting deeper than 256", 257);
  }

  @Test
  void parseObjectWantsAnObject() {
    assertThrows(Json.ParseException.class, () -> Json.parseObject("[1]"));
  }
}
