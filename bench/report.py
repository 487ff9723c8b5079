#!/usr/bin/env python3
"""One table of every benchmark figure of a `make bench` run beside its reference from the same run.

Usage: bench/report.py DIR

DIR holds what bench/run_all.sh collected: Google Benchmark JSON files (generator.json,
segment.json, order.json, registry.json, oracle.json), `flurry bench --reference --json` output
(cli_bench_1.json, cli_bench_2.json), serve.json, segment_serve.json and tso.json (written by
serve_bench.sh, segment_serve_bench.sh and tso_bench.sh with BENCH_REPORT_DIR), and
machine.json. Writes DIR/report.md and DIR/report.json and prints the Markdown. A figure whose
source is missing is listed as "not measured", never guessed. bench/README.md ("The report") says
how to read it.
"""
import json
import os
import sys


def load(directory, name):
    path = os.path.join(directory, name)
    if not os.path.exists(path):
        return None
    with open(path) as f:
        return json.load(f)


class GBench:
    """The runs of one Google Benchmark JSON file, by name."""

    def __init__(self, data):
        self.runs = {}
        for b in (data or {}).get("benchmarks", []):
            if b.get("run_type", "iteration") == "iteration" and "error_occurred" not in b:
                self.runs[b["name"]] = b

    def rate(self, name):
        """Items per second over wall time (all threads together), or None."""
        b = self.runs.get(name)
        if b is None:
            return None
        return b.get("wall_items_per_second") or b.get("items_per_second")

    def names(self):
        return list(self.runs)


def find(gb, prefix, threads):
    """The first run whose name starts with prefix + '/' and ends with threads:N."""
    for name in gb.names():
        if (name == prefix or name.startswith(prefix + "/")) and name.endswith(f"threads:{threads}"):
            return gb.rate(name)
    return None


class Table:
    def __init__(self):
        self.rows = []

    def add(self, group, measure, value, unit, reference, ref_value, note=""):
        """A row: flurry's figure and its reference's, higher is better for both (rates)."""
        ratio = None
        if value is not None and ref_value:
            ratio = value / ref_value
        self.rows.append({"group": group, "measure": measure, "value": value, "unit": unit,
                          "reference": reference, "reference_value": ref_value, "ratio": ratio,
                          "note": note})


def fmt(value, unit):
    if value is None:
        return "not measured"
    if unit == "MiB" or unit == "ms":
        return f"{value:,.1f} {unit}"
    if value >= 1e9:
        return f"{value / 1e9:,.2f}G {unit}"
    if value >= 1e6:
        return f"{value / 1e6:,.2f}M {unit}"
    if value >= 1e4:
        return f"{value / 1e3:,.1f}k {unit}"
    return f"{value:,.0f} {unit}"


def build(directory):
    t = Table()
    gen = GBench(load(directory, "generator.json"))
    seg = GBench(load(directory, "segment.json"))
    order = GBench(load(directory, "order.json"))
    registry = GBench(load(directory, "registry.json"))
    oracle = GBench(load(directory, "oracle.json"))
    serve = load(directory, "serve.json") or {}
    sserve = load(directory, "segment_serve.json") or {}
    tso = load(directory, "tso.json") or {}

    # The generator beside the textbook snowflake (Google Benchmark, one binary).
    layouts = ["classic", "uncapped"]
    for name in gen.names():  # per-preset benchmarks, when the binary has them
        if name.startswith("BM_Flurry_Next/"):
            arg = name.split("/")[1]
            if arg not in layouts and not arg.startswith("min_time"):
                layouts.append(arg)
    for layout in layouts:
        for threads in (1, 2):
            ours = find(gen, f"BM_Flurry_Next/{layout}", threads)
            ref = find(gen, f"BM_TextbookSnowflake/{layout}", threads)
            if ours is None:
                continue
            note = ("both capped by the layout's 4,096,000 IDs/s" if layout == "classic" else "")
            t.add("generator", f"next(), layout {layout}, {threads} thread{'s' * (threads > 1)}",
                  ours, "IDs/s", "textbook snowflake, same layout" if ref else "-", ref, note)
    for threads in (1, 2):
        t.add("generator", f"next_batch(1000), uncapped, {threads} thread{'s' * (threads > 1)}",
              find(gen, "BM_Flurry_NextBatch1000/uncapped", threads), "IDs/s",
              "textbook snowflake, 1000 calls", find(gen, "BM_TextbookSnowflake1000/uncapped", threads))
    for threads in (1, 2):
        t.add("generator", f"bare coarse clock read, {threads} thread{'s' * (threads > 1)}",
              find(gen, "BM_ClockCoarse", threads), "reads/s", "fine clock read",
              find(gen, "BM_ClockFine", threads), "building block")

    # `flurry bench` beside the textbook snowflake in the same process.
    for threads in (1, 2):
        cli = load(directory, f"cli_bench_{threads}.json")
        ref = (cli or {}).get("reference", {})
        t.add("flurry bench", f"flurry bench, uncapped layout, {threads} thread{'s' * (threads > 1)}",
              (cli or {}).get("ids_per_second"), "IDs/s", "textbook snowflake, same harness",
              ref.get("ids_per_second"), "IDs stored and checked unique after timing")

    # The server over HTTP and gRPC.
    http = serve.get("http", {})
    c1 = http.get("/v1/ids?count=1", {})
    t.add("server", "HTTP /v1/ids?count=1, 50 connections", c1.get("rps"), "req/s",
          "Redis INCR, 50 connections", serve.get("redis_incr_rps"),
          f"p99 {c1['p99_ms']:.2f} ms" if "p99_ms" in c1 else "")
    hfloor = serve.get("http_floor", {})
    t.add("server", "HTTP /v1/ids?count=1, 50 connections", c1.get("rps"), "req/s",
          "bare HTTP server (http_floor)", hfloor.get("rps"), "wrk's own ceiling here")
    w1000 = http.get("count=1000, wide layout", {})
    t.add("server", "HTTP count=1000, wide layout", w1000.get("ids_per_second"), "IDs/s",
          "PostgreSQL nextval, 1000 per query",
          sserve["pg_nextval1000_qps"] * 1000 if "pg_nextval1000_qps" in sserve else None)
    t.add("server", "HTTP count=1000, wide layout", w1000.get("ids_per_second"), "IDs/s",
          "in-process next_batch(1000), 1 thread", find(gen, "BM_Flurry_NextBatch1000/uncapped", 1),
          "what the HTTP path costs on top of issuing")
    grpc = serve.get("grpc")
    if grpc:
        t.add("server", "gRPC Next(count=1), 50 calls in flight", float(grpc["unary"]["rate"]),
              "calls/s", "bare gRPC server (grpc_floor)", float(grpc["floor_unary"]["rate"]),
              f"p99 {int(grpc['unary']['p99_us']) / 1000:.2f} ms "
              f"(floor {int(grpc['floor_unary']['p99_us']) / 1000:.2f} ms)")
        t.add("server", "gRPC Stream, count=1 messages", float(grpc["stream"]["rate"]), "IDs/s",
              "bare gRPC server (grpc_floor)", float(grpc["floor_stream"]["rate"]))
        t.add("server", "gRPC StreamRange, wide layout", float(grpc["range"]["rate"]), "IDs/s",
              "in-process next_batch(1000), 1 thread", find(gen, "BM_Flurry_NextBatch1000/uncapped", 1))
    for key, label in (("rss_idle_mib", "idle RSS, default settings (gRPC on)"),
                       ("rss_idle_nogrpc_mib", "idle RSS, --grpc-listen ''")):
        if serve.get(key) is not None:
            t.rows.append({"group": "server", "measure": label, "value": serve[key], "unit": "MiB",
                           "reference": "bare gRPC server (grpc_floor)",
                           "reference_value": (grpc or {}).get("floor_rss_idle_mib"), "ratio": None,
                           "note": "lower is better; no ratio"})

    # The timestamp oracle: in process beside its generator alone, then over gRPC beside the same
    # client against a Tso server that does no work.
    t.add("timestamp oracle", "TimestampOracle::grant(1) in process, 1 thread",
          find(oracle, "BM_Oracle_Grant/1", 1), "grants/s", "Generator::next_range(1), tso layout",
          find(oracle, "BM_Generator_NextRange/1", 1), "the lease, the gate and the counters")
    for mode, label in (("async", "continuations"), ("threads", "threads")):
        ours = tso.get("flurry", {}).get(mode)
        ref = tso.get("floor", {}).get(mode)
        if ours or ref:
            note = ""
            if ours and ref:
                note = (f"p99 {ours['p99_us'] / 1000:.2f} ms (floor {ref['p99_us'] / 1000:.2f} ms), "
                        f"mean batch {ours['mean_batch']:.0f}")
            t.add("timestamp oracle", f"gRPC Tso.Stream tso(), 1,000 callers as {label}",
                  ours and ours["rate"], "timestamps/s", "Tso server with no work (tso_load floor)",
                  ref and ref["rate"], note)
    segs = tso.get("segments", {})
    if segs:
        strict, plain = segs.get("strict"), segs.get("plain")
        t.add("timestamp oracle", "strict segment tag, HTTP ids?count=1 (one server)",
              strict and strict["rps"], "numbers/s", "a non-strict tag on the same server",
              plain and plain["rps"])

    # Segment mode and order numbers.
    for threads in (1, 2):
        atomic = find(seg, "BM_Ref_AtomicAdd", threads)
        s = "s" * (threads > 1)
        t.add("segment", f"next() by handle, {threads} thread{s}", find(seg, "BM_Segment_Next", threads),
              "IDs/s", "std::atomic fetch_add", atomic)
        t.add("segment", f"next() by tag name, {threads} thread{s}",
              find(seg, "BM_Segment_NextByName", threads), "IDs/s", "std::atomic fetch_add", atomic)
    sids = sserve.get("segment", {}).get("ids", {})
    t.add("segment", "HTTP /v1/segments/T/ids?count=1", sids.get("rps"), "req/s",
          "PostgreSQL nextval (pgbench)", sserve.get("pg_nextval_qps"))
    srange = sserve.get("segment", {}).get("range", {})
    t.add("segment", "HTTP /v1/segments/T/range?size=1000", srange.get("rps"), "req/s",
          "Redis INCRBY 1000", sserve.get("redis_incrby1000_rps"))
    for threads in (1, 2):
        aes = find(order, "BM_Ref_Aes128Block", threads)
        s = "s" * (threads > 1)
        for bench, label in (("BM_Order_Encode/digits19_damm", "encode, 19 digits + Damm"),
                             ("BM_Order_Decode/digits19_damm", "decode, 19 digits + Damm"),
                             ("BM_Order_Encode/base32_13_mod37", "encode, 13 base32 + mod 37"),
                             ("BM_FF1_Encrypt/radix10_n19", "FF1 alone, 19 digits")):
            t.add("order numbers", f"{label}, {threads} thread{s}", find(order, bench, threads),
                  "numbers/s", "one AES-128 block (OpenSSL EVP)", aes,
                  "FF1 takes 10 AES blocks: 0.1x is its bound")

    # The node registries beside a plain write to the same store.
    for backend, ref in (("Sqlite", "BM_SqliteReferenceWrite"), ("Etcd", "BM_EtcdReferencePut"),
                         ("Postgres", "BM_PostgresReferenceUpdate")):
        ref_rate = None
        for name in registry.names():
            if name.startswith(ref):
                ref_rate = registry.rate(name)
        for op in ("BM_SaveHorizon", "BM_Renew"):
            ours = None
            for name in registry.names():
                if name.startswith(f"{op}/{backend}"):
                    ours = registry.rate(name)
            if ours is not None or ref_rate is not None:
                t.add("registry", f"{op[3:]} on {backend}", ours, "ops/s",
                      f"plain write ({ref[3:]})", ref_rate)
    return t


def markdown(t, machine):
    lines = ["# flurry benchmark report", ""]
    for key in ("cpu", "cpus", "kernel", "date", "commit"):
        if key in machine:
            lines.append(f"- {key}: {machine[key]}")
    lines += ["", "| group | measure | flurry | reference | reference's figure | ratio | note |",
              "|---|---|---|---|---|---|---|"]
    for r in t.rows:
        ratio = f"{r['ratio']:.2f}x" if r["ratio"] is not None else ""
        lines.append(f"| {r['group']} | {r['measure']} | {fmt(r['value'], r['unit'])} | "
                     f"{r['reference']} | {fmt(r['reference_value'], r['unit'])} | {ratio} | {r['note']} |")
    return "\n".join(lines) + "\n"


def main():
    if len(sys.argv) != 2:
        sys.exit("usage: bench/report.py DIR")
    directory = sys.argv[1]
    machine = load(directory, "machine.json") or {}
    t = build(directory)
    md = markdown(t, machine)
    with open(os.path.join(directory, "report.md"), "w") as f:
        f.write(md)
    with open(os.path.join(directory, "report.json"), "w") as f:
        json.dump({"machine": machine, "rows": t.rows}, f, indent=1)
    print(md)


if __name__ == "__main__":
    main()
