package dev.flurry.client;

import java.io.IOException;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/** The fleet fleet.py started (FLURRY_TEST_* variables) and its control API. */
final class Fleet {
  final List<String> endpoints;
  final List<String> servers;
  final String control;
  final String adminToken;
  private final HttpClient http = HttpClient.newBuilder().version(HttpClient.Version.HTTP_1_1)
      .connectTimeout(Duration.ofSeconds(5)).build();

  Fleet() {
    endpoints = List.of(env("FLURRY_TEST_ENDPOINTS").split(","));
    servers = List.of(env("FLURRY_TEST_SERVERS").split(","));
    control = env("FLURRY_TEST_CONTROL");
    adminToken = env("FLURRY_TEST_ADMIN_TOKEN");
  }

  private static String env(String name) {
    String v = System.getenv(name);
    if (v == null || v.isEmpty()) {
      throw new IllegalStateException(name + " is not set: run the tests under clients/conformance/fleet.py");
    }
    return v;
  }

  String request(String method, String url) {
    try {
      HttpResponse<String> r = http.send(HttpRequest.newBuilder(URI.create(url)).timeout(Duration.ofSeconds(30))
          .method(method, HttpRequest.BodyPublishers.noBody()).build(), HttpResponse.BodyHandlers.ofString());
      if (r.statusCode() != 200) throw new IllegalStateException(method + " " + url + ": " + r.statusCode() + " " + r.body());
      return r.body();
    } catch (IOException | InterruptedException e) {
      throw new IllegalStateException(method + " " + url + ": " + e, e);
    }
  }

  Map<String, Object> getJson(String url) {
    return Json.parseObject(request("GET", url));
  }

  void control(int server, String action) {
    request("POST", control + "/servers/" + server + "/" + action);
  }

  /** Zeroes the proxies' stats. */
  void resetStats() {
    for (int i = 0; i < endpoints.size(); i++) control(i, "reset");
  }

  /** A proxy's counter, e.g. stat(0, "ids", "max_in_flight") or stat(0, "faulted", null). */
  long stat(int server, String group, String key) {
    Map<String, Object> s = getJson(control + "/servers/" + server + "/stats");
    Object v = key == null ? s.get(group) : ((Map<?, ?>) s.get(group)).get(key);
    return (Long) v;
  }

  /** Puts every server back: started, no faults, no delays. */
  void restore() {
    for (int i = 0; i < endpoints.size(); i++) {
      control(i, "start");
      control(i, "fault?status=503&count=0");
      control(i, "delay?ms=0&count=0");
    }
  }

  /**
   * The index of the server that leads the timestamp oracle (its GET /readyz/tso answers 200),
   * waiting up to 30 s for one to lead.
   */
  int tsoLeader() throws InterruptedException {
    long end = System.nanoTime() + 30_000_000_000L;
    do {
      for (int i = 0; i < servers.size(); i++) {
        try {
          HttpResponse<Void> r = http.send(HttpRequest.newBuilder(URI.create(servers.get(i) + "/readyz/tso"))
              .timeout(Duration.ofSeconds(5)).build(), HttpResponse.BodyHandlers.discarding());
          if (r.statusCode() == 200) return i;
        } catch (IOException e) {
          // not up
        }
      }
      Thread.sleep(50);
    } while (System.nanoTime() < end);
    throw new IllegalStateException("no server leads the timestamp oracle after 30 s");
  }

  /** The node ID a server holds (from its /readyz). */
  long node(int server) {
    return (Long) getJson(servers.get(server) + "/readyz").get("node");
  }

  private static final Pattern REQUESTS = Pattern.compile(
      "^flurry_http_requests_total\\{route=\"/v1/ids\",code=\"(\\d+)\"\\} (\\d+)$", Pattern.MULTILINE);

  /** flurry_http_requests_total{route="/v1/ids"} summed over the servers, one code or all (null). */
  static long idRequests(List<String> servers, String code, Fleet fleet) {
    long sum = 0;
    for (String s : servers) {
      Matcher m = REQUESTS.matcher(fleet.request("GET", s + "/metrics"));
      while (m.find()) {
        if (code == null || code.equals(m.group(1))) sum += Long.parseLong(m.group(2));
      }
    }
    return sum;
  }
}
