package dev.flurry.client;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;

import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.util.List;
import java.util.concurrent.Flow;
import org.junit.jupiter.api.Test;

/** format=text bodies parsed as they arrive, in pieces split anywhere. */
class IdsParserTest {
  private static Object parse(int expected, String... pieces) {
    IdsParser p = new IdsParser(expected);
    p.onSubscribe(new Flow.Subscription() {
      @Override
      public void request(long n) {}

      @Override
      public void cancel() {}
    });
    for (String piece : pieces) p.onNext(List.of(ByteBuffer.wrap(piece.getBytes(StandardCharsets.US_ASCII))));
    p.onComplete();
    return p.result();
  }

  @Test
  void idsSplitAcrossBuffers() {
    assertArrayEquals(new long[] {251753601578303488L, 7, 9223372036854775807L},
        (long[]) parse(3, "2517536015", "78303488\n7", "\r\n9223372036854775807\n"));
    assertArrayEquals(new long[] {1, 2, 3}, (long[]) parse(1, "1\n2\n3"), "grows past the expected count");
  }

  @Test
  void malformedBodiesSayWhatAndWhere() {
    assertEquals("byte 0x2c at 1 is not a digit or a line end", parse(2, "1,2\n"));
    assertEquals("an empty line at byte 2", parse(2, "1\n", "\n"));
    assertEquals("a number longer than 19 digits at byte 19", parse(1, "12345678901234567890\n"));
    assertEquals("no IDs in the body", parse(1, ""));
  }

  @Test
  void sameWidthLinesReadEightDigitsAtATimeMatchDigitByDigit() {
    long[] expected = {251753601578303488L, 251753601578303489L, 999999999999999999L, 1000000000000000000L,
        9223372036854775807L, 1234567890123456L, 1234567890123457L, 12345678901234567L, 10000000000000009L, 7, 8};
    StringBuilder body = new StringBuilder();
    for (long id : expected) body.append(id).append('\n');
    String text = body.toString();
    for (int cut = 0; cut <= text.length(); cut++) {
      assertArrayEquals(expected, (long[]) parse(4, text.substring(0, cut), text.substring(cut)), "split at " + cut);
    }
  }

  @Test
  void aBadByteInASameWidthLineIsFoundWhereItIs() {
    assertEquals("byte 0x78 at 33 is not a digit or a line end",
        parse(2, "251753601578303488\n25175360157830x488\n"));
    assertEquals("byte 0x2d at 19 is not a digit or a line end",
        parse(2, "251753601578303488\n-51753601578303488\n"));
    assertEquals("byte 0x20 at 35 is not a digit or a line end",
        parse(2, "251753601578303488\n2517536015783034 8\n"));
  }
}
