package dev.flurry.client;

import java.math.BigInteger;
import java.util.ArrayList;
import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * A small, strict JSON reader (RFC 8259): the JDK has none, and the client reads /v1/layout,
 * segment ranges and error bodies. Objects become {@code Map<String, Object>} (insertion order,
 * a repeated key is refused), arrays {@code List<Object>}, strings {@code String}, integers
 * {@code Long} (or {@code BigInteger} beyond 64 bits), other numbers {@code Double}, and
 * {@code true}, {@code false}, {@code null} as {@code Boolean} and {@code null}.
 * Anything else, including trailing text, raises {@link Json.ParseException} saying what was
 * wrong and at which character offset. Stateless and thread-safe.
 */
public final class Json {
  private Json() {}

  /** Malformed JSON: the message says what was expected and where (0-based offset). */
  public static final class ParseException extends RuntimeException {
    private static final long serialVersionUID = 1L;
    private final int offset;

    ParseException(String what, int offset) {
      super("JSON: " + what + " at offset " + offset);
      this.offset = offset;
    }

    /** The 0-based character offset where the text went wrong. */
    public int offset() {
      return offset;
    }
  }

  /** Parses one JSON value that must make up the whole text (whitespace around it allowed). */
  public static Object parse(String text) {
    Reader r = new Reader(text);
    r.skipSpace();
    Object v = r.value(0);
    r.skipSpace();
    if (r.pos != text.length()) throw r.fail("unexpected " + r.describe() + " after the value");
    return v;
  }

  /** Parses text that must be a JSON object. */
  @SuppressWarnings("unchecked")
  public static Map<String, Object> parseObject(String text) {
    Object v = parse(text);
    if (!(v instanceof Map)) throw new ParseException("expected an object", 0);
    return (Map<String, Object>) v;
  }

  private static final class Reader {
    private static final int MAX_DEPTH = 256;
    final String s;
    int pos;

    Reader(String s) {
      this.s = s;
    }

    ParseException fail(String what) {
      return new ParseException(what, pos);
    }

    String describe() {
      if (pos >= s.length()) return "end of text";
      char c = s.charAt(pos);
      if (c < 0x20 || c > 0x7e) return String.format("character U+%04X", (int) c);
      return "'" + c + "'";
    }

    void skipSpace() {
      while (pos < s.length()) {
        char c = s.charAt(pos);
        if (c != ' ' && c != '\t' && c != '\n' && c != '\r') return;
        pos++;
      }
    }

    Object value(int depth) {
      if (depth > MAX_DEPTH) throw fail("nesting deeper than " + MAX_DEPTH);
      if (pos >= s.length()) throw fail("expected a value, found end of text");
      char c = s.charAt(pos);
      switch (c) {
        case '{':
          return object(depth);
        case '[':
          return array(depth);
        case '"':
          return string();
        case 't':
          return literal("true", Boolean.TRUE);
        case 'f':
          return literal("false", Boolean.FALSE);
        case 'n':
          return literal("null", null);
        default:
          if (c == '-' || (c >= '0' && c <= '9')) return number();
          throw fail("expected a value, found " + describe());
      }
    }

    Object literal(String word, Object v) {
      if (!s.startsWith(word, pos)) throw fail("expected a value, found " + describe());
      pos += word.length();
      return v;
    }

    Map<String, Object> object(int depth) {
      pos++; // '{'
      Map<String, Object> m = new LinkedHashMap<>();
      skipSpace();
      if (pos < s.length() && s.charAt(pos) == '}') {
        pos++;
        return m;
      }
      while (true) {
        skipSpace();
        if (pos >= s.length() || s.charAt(pos) != '"') throw fail("expected a string key, found " + describe());
        int keyAt = pos;
        String key = string();
        skipSpace();
        if (pos >= s.length() || s.charAt(pos) != ':') throw fail("expected ':', found " + describe());
        pos++;
        skipSpace();
        Object v = value(depth + 1);
        if (m.containsKey(key)) throw new ParseException("repeated key \"" + key + "\"", keyAt);
        m.put(key, v);
        skipSpace();
        if (pos < s.length() && s.charAt(pos) == ',') {
          pos++;
          continue;
        }
        if (pos < s.length() && s.charAt(pos) == '}') {
          pos++;
          return m;
        }
        throw fail("expected ',' or '}', found " + describe());
      }
    }

    List<Object> array(int depth) {
      pos++; // '['
      List<Object> a = new ArrayList<>();
      skipSpace();
      if (pos < s.length() && s.charAt(pos) == ']') {
        pos++;
        return Collections.unmodifiableList(a);
      }
      while (true) {
        skipSpace();
        a.add(value(depth + 1));
        skipSpace();
        if (pos < s.length() && s.charAt(pos) == ',') {
          pos++;
          continue;
        }
        if (pos < s.length() && s.charAt(pos) == ']') {
          pos++;
          return a;
        }
        throw fail("expected ',' or ']', found " + describe());
      }
    }

    String string() {
      pos++; // '"'
      StringBuilder b = new StringBuilder();
      while (true) {
        if (pos >= s.length()) throw fail("unterminated string");
        char c = s.charAt(pos);
        if (c == '"') {
          pos++;
          return b.toString();
        }
        if (c < 0x20) throw fail("control character U+" + String.format("%04X", (int) c) + " in a string");
        if (c != '\\') {
          b.append(c);
          pos++;
          continue;
        }
        pos++;
        if (pos >= s.length()) throw fail("unterminated escape");
        char e = s.charAt(pos);
        switch (e) {
          case '"': b.append('"'); break;
          case '\\': b.append('\\'); break;
          case '/': b.append('/'); break;
          case 'b': b.append('\b'); break;
          case 'f': b.append('\f'); break;
          case 'n': b.append('\n'); break;
          case 'r': b.append('\r'); break;
          case 't': b.append('\t'); break;
          case 'u':
            if (pos + 4 >= s.length()) throw fail("incomplete \\u escape");
            int cp = 0;
            for (int k = 1; k <= 4; k++) {
              int d = Character.digit(s.charAt(pos + k), 16);
              if (d < 0) {
                pos += k;
                throw fail("expected a hex digit in \\u escape, found " + describe());
              }
              cp = cp * 16 + d;
            }
            b.append((char) cp);
            pos += 4;
            break;
          default:
            throw fail("invalid escape \\" + e);
        }
        pos++;
      }
    }

    Object number() {
      int start = pos;
      if (s.charAt(pos) == '-') pos++;
      if (pos >= s.length() || !isDigit(s.charAt(pos))) throw fail("expected a digit, found " + describe());
      if (s.charAt(pos) == '0') {
        pos++;
        if (pos < s.length() && isDigit(s.charAt(pos))) throw fail("leading zero in a number");
      } else {
        while (pos < s.length() && isDigit(s.charAt(pos))) pos++;
      }
      boolean integer = true;
      if (pos < s.length() && s.charAt(pos) == '.') {
        integer = false;
        pos++;
        if (pos >= s.length() || !isDigit(s.charAt(pos))) throw fail("expected a digit after '.', found " + describe());
        while (pos < s.length() && isDigit(s.charAt(pos))) pos++;
      }
      if (pos < s.length() && (s.charAt(pos) == 'e' || s.charAt(pos) == 'E')) {
        integer = false;
        pos++;
        if (pos < s.length() && (s.charAt(pos) == '+' || s.charAt(pos) == '-')) pos++;
        if (pos >= s.length() || !isDigit(s.charAt(pos))) throw fail("expected a digit in the exponent, found " + describe());
        while (pos < s.length() && isDigit(s.charAt(pos))) pos++;
      }
      String t = s.substring(start, pos);
      if (!integer) return Double.parseDouble(t);
      BigInteger big = new BigInteger(t);
      return big.bitLength() < 64 ? (Object) big.longValue() : big;
    }

    static boolean isDigit(char c) {
      return c >= '0' && c <= '9';
    }
  }
}
