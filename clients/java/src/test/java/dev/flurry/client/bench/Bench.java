package dev.flurry.client.bench;

import dev.flurry.client.FlurryClient;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.concurrent.atomic.LongAdder;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/**
 * The Java client's benchmark (not a test):
 *
 * <pre>FLURRY_BENCH_SERVER=http://127.0.0.1:7609 java -cp flurry-client.jar:flurry-client-tests.jar \
 *     dev.flurry.client.bench.Bench [--duration S]</pre>
 *
 * Prints one JSON line per run: "buffer" (default settings, next() in a loop per caller) and
 * "per_request" (each caller its own keep-alive connection, GET /v1/ids?count=1 per ID), with 1
 * and 8 callers. "requests" is the growth of the server's flurry_http_requests_total{route="/v1/ids"}.
 */
public final class Bench {
  private static final Pattern REQUESTS =
      Pattern.compile("^flurry_http_requests_total\\{route=\"/v1/ids\",code=\"\\d+\"\\} (\\d+)$", Pattern.MULTILINE);

  private interface Caller {
    /** Takes IDs until the deadline (System.nanoTime()); returns how many. */
    long run(long deadline) throws Exception;
  }

  public static void main(String[] args) throws Exception {
    double duration = 3;
    for (int i = 0; i < args.length; i++) {
      if (args[i].equals("--duration") && i + 1 < args.length) {
        duration = Double.parseDouble(args[++i]);
      } else {
        System.err.println("usage: Bench [--duration S]   (FLURRY_BENCH_SERVER=http://HOST:PORT)");
        System.exit(2);
      }
    }
    String server = System.getenv("FLURRY_BENCH_SERVER");
    if (server == null || server.isEmpty()) {
      System.err.println("Bench: set FLURRY_BENCH_SERVER to a flurry server's base URL");
      System.exit(2);
    }
    server = server.split(",")[0];
    HttpClient metricsHttp = HttpClient.newBuilder().version(HttpClient.Version.HTTP_1_1).build();
    // Warm-up, not measured: the JIT compiles the refill's parser and next() within the first
    // seconds (a cold 3 s run climbs from about 4M to 12M IDs/s), and a long-running service
    // runs compiled code, so that is what the figures below describe.
    try (FlurryClient c = FlurryClient.builder().endpoints(server).build()) {
      long until = System.nanoTime() + 2_000_000_000L;
      while (System.nanoTime() < until) {
        for (int k = 0; k < 1024; k++) c.next();
      }
    }
    for (int callers : new int[] {1, 8}) {
      try (FlurryClient c = FlurryClient.builder().endpoints(server).build()) {
        c.layout();
        run("buffer", callers, duration, server, metricsHttp, () -> deadline -> {
          long n = 0;
          while (true) {
            for (int k = 0; k < 1024; k++) c.next();
            n += 1024;
            if (System.nanoTime() >= deadline) return n;
          }
        });
      }
    }
    for (int callers : new int[] {1, 8}) {
      String url = server + "/v1/ids?count=1&format=text";
      run("per_request", callers, duration, server, metricsHttp, () -> {
        // One connection each, configured as the library's own (a direct executor: no pool
        // thread hand-offs per response).
        HttpClient own = HttpClient.newBuilder().version(HttpClient.Version.HTTP_1_1).executor(Runnable::run).build();
        HttpRequest req = HttpRequest.newBuilder(URI.create(url)).timeout(Duration.ofSeconds(5)).GET().build();
        return deadline -> {
          long n = 0;
          while (System.nanoTime() < deadline) {
            HttpResponse<byte[]> r = own.send(req, HttpResponse.BodyHandlers.ofByteArray());
            if (r.statusCode() != 200) throw new IllegalStateException("HTTP " + r.statusCode());
            n++;
          }
          return n;
        };
      });
    }
  }

  private interface CallerFactory {
    Caller make();
  }

  private static void run(String bench, int callers, double duration, String server, HttpClient http,
                          CallerFactory factory) throws Exception {
    long before = requests(server, http);
    LongAdder ids = new LongAdder();
    List<Thread> threads = new ArrayList<>();
    List<Throwable> errors = new ArrayList<>();
    long start = System.nanoTime();
    long deadline = start + (long) (duration * 1e9);
    for (int i = 0; i < callers; i++) {
      Caller caller = factory.make();
      Thread t = new Thread(() -> {
        try {
          ids.add(caller.run(deadline));
        } catch (Throwable e) {
          synchronized (errors) {
            errors.add(e);
          }
        }
      });
      threads.add(t);
      t.start();
    }
    for (Thread t : threads) t.join();
    double seconds = (System.nanoTime() - start) / 1e9;
    if (!errors.isEmpty()) throw new RuntimeException(bench + " failed", errors.get(0));
    long q = requests(server, http) - before;
    long n = ids.sum();
    System.out.println(String.format(Locale.ROOT,
        "{\"client\":\"java\",\"bench\":\"%s\",\"callers\":%d,\"ids\":%d,\"seconds\":%.3f,\"ids_per_s\":%.0f,"
            + "\"requests\":%d,\"requests_per_million\":%.1f}",
        bench, callers, n, seconds, n / seconds, q, n == 0 ? 0.0 : q * 1e6 / n));
  }

  /** flurry_http_requests_total{route="/v1/ids"}, all codes, from the server's /metrics. */
  private static long requests(String server, HttpClient http) throws Exception {
    String text = http.send(HttpRequest.newBuilder(URI.create(server + "/metrics")).GET().build(),
        HttpResponse.BodyHandlers.ofString()).body();
    Matcher m = REQUESTS.matcher(text);
    long sum = 0;
    while (m.find()) sum += Long.parseLong(m.group(1));
    return sum;
  }
}
