#!/usr/bin/env python3
"""The chaos run: a registry (etcd, PostgreSQL or SQLite), several `flurry serve` nodes under
load, and one fault after another on the same cluster; then every ID is checked (no duplicate,
order, hand-off, time within max_lead, every refusal a 503 with a reason, no unexplained drop)
and a table printed. See tests/chaos/README.md.

Usage: chaos.py FLURRY [--registry etcd|postgres|sqlite] [options]   (--help for all)
Exit code 0 when every check passed, 1 otherwise (2 for bad usage or a missing prerequisite).
"""

import argparse
import json
import os
import random
import re
import shutil
import subprocess
import sys
import tempfile
import time
import traceback

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from chaoslib import checker, layout, nodes, procs, registries, runner, scenarios  # noqa: E402


def parse_args(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("flurry", help="the flurry binary")
    ap.add_argument("--registry", choices=sorted(registries.KINDS), default="etcd")
    ap.add_argument("--nodes", type=int, default=5, help="main nodes (4 to 6), three of them under libfaketime")
    ap.add_argument("--ttl-ms", type=int, default=None, help="lease TTL (default: 2000, the etcd minimum)")
    ap.add_argument("--max-lead-ms", type=int, default=1000)
    ap.add_argument("--batch", type=int, default=1000, help="IDs per request")
    ap.add_argument("--rate", type=float, default=25.0,
                    help="requests a second per main node's client at most (0: as fast as it can)")
    ap.add_argument("--conns-per-node", type=int, default=1)
    ap.add_argument("--timeout", type=float, default=10.0, help="client timeout per request (s)")
    ap.add_argument("--baseline-seconds", type=float, default=5.0)
    ap.add_argument("--outage-extra", type=float, default=2.0, help="the registry outage lasts TTL + this (s)")
    ap.add_argument("--churn-nodes", type=int, default=32)
    ap.add_argument("--churn-seconds", type=float, default=60.0)
    ap.add_argument("--churn-ops", type=float, default=2.0, help="churn starts/stops a second")
    ap.add_argument("--churn-rate", type=float, default=4.0, help="requests a second per churn node's client")
    ap.add_argument("--max-spares", type=int, default=4)
    ap.add_argument("--recovery-timeout", type=float, default=20.0)
    ap.add_argument("--scenarios", default="all",
                    help="comma-separated, from: " + ",".join(n for n, _ in scenarios.ALL + scenarios.EXTRA))
    ap.add_argument("--rounds", type=int, default=2,
                    help="run the fault scenarios (all but baseline and churn) this many times, on the "
                         "cluster as the earlier rounds left it")
    ap.add_argument("--seed", type=int, default=None)
    ap.add_argument("--log-level", default="info")
    ap.add_argument("--keep", action="store_true", help="keep the work directory (also CHAOS_KEEP=1)")
    ap.add_argument("--json", help="write the results as JSON to this file")
    ap.add_argument("--expect-duplicates", action="store_true",
                    help="succeed only if duplicates are found (with the negative_control_twins scenario)")
    ap.add_argument("--registry-only", action="store_true",
                    help="no flurry nodes: start the registry, inject its two faults, check it recovers, stop")
    a = ap.parse_args(argv)
    if a.ttl_ms is None:
        a.ttl_ms = 2000
    if not 1 <= a.nodes <= 16:
        ap.error("--nodes: 1 to 16")
    return a


def prerequisites(a):
    missing = []
    if not os.access(a.flurry, os.X_OK):
        missing.append(f"not an executable: {a.flurry}")
    if not nodes.libfaketime_installed():
        missing.append("libfaketime is not installed (Debian package faketime)")
    if a.registry.startswith("etcd") and not shutil.which(registries.etcd_mod.ETCD):
        missing.append(f"etcd not found ({registries.etcd_mod.ETCD}; Debian package etcd-server)")
    if a.registry == "postgres":
        if not os.path.exists(os.path.join(registries.pg_mod.PG_BIN, "postgres")):
            missing.append(f"PostgreSQL not found in {registries.pg_mod.PG_BIN} (Debian package postgresql-15)")
        if os.geteuid() != 0:
            missing.append("the PostgreSQL registry run must be root (it runs the server as the postgres user)")
    if not missing:
        p = subprocess.run([a.flurry, "serve", *registries.KINDS[a.registry].probe_args, "--print-config"],
                           capture_output=True, text=True)
        if p.returncode != 0 and not a.registry_only:
            missing.append(f"this flurry has no '{a.registry}' registry: {p.stderr.strip()[:300]}")
    return missing


def check_decoder(run, lay, streams, rng, samples=20):
    """Cross-checks the Python decoder against the server's GET /v1/ids/{id} on a sample."""
    target = next((p for p in run.main_procs() if p in run.fleet.running()), None)
    pool = [st for st in streams if len(st.ids)]
    if target is None or not pool:
        return
    for _ in range(samples):
        st = rng.choice(pool)
        x = st.ids[rng.randrange(len(st.ids))]
        try:
            status, j = run.fleet.get_json(target, f"/v1/ids/{x}")
        except (OSError, ValueError) as e:
            run.violation(f"decode of {x} on {target.label} failed: {e!r}")
            return
        if status != 200 or j.get("unix_ms") != lay.unix_ms(x) or \
                j.get("node") not in (None, lay.owner_text(lay.owner(x))):
            run.violation(f"the Python decoder disagrees with the server on {x}: "
                          f"{lay.unix_ms(x)} / node {lay.owner_text(lay.owner(x))} vs {status} {j}")
            return


def fmt_s(x):
    return "-" if x is None else f"{x:.2f}"


def report(a, res, run, wall_seconds):
    rows = [("scenario", "secs", "IDs", "dups", "refusals", "node-down", "violations", "unavail", "recovery")]
    for sc in res.scenarios:
        info = run.info.get(sc.name, {})
        rows.append((sc.name, f"{sc.seconds:.1f}", str(sc.ids), str(sc.dups), str(sc.refusals), str(sc.node_down),
                     str(sc.violations), fmt_s(sc.unavailable), fmt_s(info.get("recovery"))))
    rows.append(("total", f"{sum(sc.seconds for sc in res.scenarios):.1f}", str(res.total_ids), str(res.duplicates),
                 str(sum(sc.refusals for sc in res.scenarios)), str(sum(sc.node_down for sc in res.scenarios)),
                 str(len(res.violations)), fmt_s(max((sc.unavailable for sc in res.scenarios), default=None)), ""))
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    out = []
    for k, r in enumerate(rows):
        out.append("  ".join(c.ljust(widths[i]) if i == 0 else c.rjust(widths[i]) for i, c in enumerate(r)))
        if k == 0 or k == len(rows) - 2:
            out.append("  ".join("-" * w for w in widths))
    print()
    print(f"chaos run: registry {a.registry}, {a.nodes} nodes, TTL {a.ttl_ms} ms, max_lead {a.max_lead_ms} ms, "
          f"batch {a.batch}, seed {a.seed}, {wall_seconds:.0f} s in all")
    print("\n".join(out))
    print("(unavail: longest time no client got an ID from any node; recovery: from the fault's end until "
          "every node served again; seconds)")
    print()
    for sc in res.scenarios:
        info = run.info.get(sc.name, {})
        reasons = ", ".join(f"{k} x{v}" for k, v in sorted(sc.reasons.items(), key=lambda kv: -kv[1]))
        print(f"{sc.name}: {info.get('note') or ''}" + (f" [refusals: {reasons}]" if reasons else ""))
    if res.max_lead_seen_ms is not None:
        print(f"largest lead of an ID's time over the wall clock at receipt: {res.max_lead_seen_ms:.0f} ms")
    if res.violations:
        print(f"\n{len(res.violations)} VIOLATIONS:")
        for name, text in res.violations[:40]:
            print(f"  [{name}] {text}")
        if len(res.violations) > 40:
            print(f"  ... and {len(res.violations) - 40} more")
    if not a.expect_duplicates:
        print("\nRESULT:", "PASS" if res.ok else "FAIL", flush=True)


def write_json(path, a, res, run, wall_seconds):
    data = {
        "registry": a.registry, "nodes": a.nodes, "ttl_ms": a.ttl_ms, "seed": a.seed, "seconds": wall_seconds,
        "ok": res.ok, "total_ids": res.total_ids, "duplicates": res.duplicates,
        "violations": [{"scenario": n, "text": t} for n, t in res.violations],
        "scenarios": [{"name": sc.name, "seconds": sc.seconds, "ids": sc.ids, "dups": sc.dups,
                       "refusals": sc.refusals, "reasons": sc.reasons, "node_down": sc.node_down,
                       "violations": sc.violations, "unavailable": sc.unavailable,
                       "recovery": run.info.get(sc.name, {}).get("recovery"),
                       "note": run.info.get(sc.name, {}).get("note")} for sc in res.scenarios],
    }
    with open(path, "w") as f:
        json.dump(data, f, indent=1)


def registry_only(a, registry, run, t_start, result):
    """Exercises the registry's servers and faults alone (no flurry): a check of the harness."""
    ok = True
    try:
        with run.scenario("start"):
            t0 = time.monotonic()
            registry.start()
            procs.log(f"registry up in {time.monotonic() - t0:.1f} s: {registry.describe()}")
        secs = a.ttl_ms / 1000.0 + a.outage_extra
        for name, fn in (("primary_kill", lambda: registry.primary_kill(run)),
                         ("hang", lambda: registry.hang(run, secs)),
                         ("outage", lambda: registry.outage(run, secs))):
            with run.scenario(name):
                t0 = time.monotonic()
                note = fn()
                f = run.info[name]["fault"]
                procs.log(f"{name}: {note}; fault {f[1] - f[0]:.1f} s, {time.monotonic() - t0:.1f} s in all; "
                          f"now {registry.describe()}")
    except Exception:  # noqa: BLE001
        traceback.print_exc()
        ok = False
    finally:
        t0 = time.monotonic()
        registry.stop()
        procs.log(f"registry stopped in {time.monotonic() - t0:.1f} s; {time.monotonic() - t_start:.1f} s in all")
    result["ok"] = ok
    print("RESULT:", "PASS" if ok else "FAIL")
    return 0 if ok else 1


def main(argv):
    a = parse_args(argv)
    a.flurry = os.path.realpath(a.flurry)
    if a.seed is None:
        a.seed = random.randrange(1 << 30)
    missing = prerequisites(a)
    if missing:
        for m in missing:
            print(f"chaos: {m}", file=sys.stderr)
        return 2
    if a.registry.startswith("etcd") and a.ttl_ms < registries.EtcdRegistry.min_ttl_ms:
        print(f"chaos: etcd leases are at least {registries.EtcdRegistry.min_ttl_ms} ms", file=sys.stderr)
        return 2
    names = [n for n, _ in scenarios.ALL] if a.scenarios == "all" else a.scenarios.split(",")
    table = dict(scenarios.ALL + scenarios.EXTRA)
    for n in names:
        if n not in table:
            print(f"chaos: unknown scenario {n!r}", file=sys.stderr)
            return 2
    # Rounds: baseline first, the faults `rounds` times, churn last.
    once = ("baseline", "churn")
    plan = [(n, n) for n in names if n == "baseline"]
    for r in range(1, max(1, a.rounds) + 1):
        plan += [(n if r == 1 else f"{n}#{r}", n) for n in names if n not in once]
    plan += [(n, n) for n in names if n == "churn"]
    keep = a.keep or bool(os.environ.get("CHAOS_KEEP"))
    work = tempfile.mkdtemp(prefix=f"flurry-chaos-{a.registry}-")
    os.chmod(work, 0o711)  # the postgres user must reach its directory inside
    procs.install_cleanup()
    result = {"ok": False}
    procs.at_cleanup(lambda: None if (keep or not result["ok"]) else procs.remove_tree(work))
    t_start = time.monotonic()
    rng = random.Random(a.seed)
    random.seed(a.seed)
    procs.log(f"chaos: registry {a.registry}, seed {a.seed}, work directory {work}")

    registry = registries.make(a.registry, work)
    fleet = nodes.Fleet(a.flurry, work, registry, a.batch, a.rate, a.timeout, a.ttl_ms, a.max_lead_ms,
                        a.log_level, a.conns_per_node)
    opts = argparse.Namespace(**vars(a))
    opts.recovery_timeout = a.recovery_timeout
    run = runner.Run(registry, fleet, opts)
    run.rng = rng
    spare_counter = iter(range(10 ** 6))
    run.next_spare = lambda: next(spare_counter)
    lay = None
    if a.registry_only:
        return registry_only(a, registry, run, t_start, result)
    try:
        registry.start()
        procs.log(f"registry: {registry.describe()}")
        with run.scenario("start"):
            # n0, n1 and n2 run under libfaketime: n0's clock steps while it runs, n1 restarts
            # 5 s behind, n2 an hour behind.
            run.main_slots = [fleet.slot(f"n{i}", faked=(i < 3)) for i in range(a.nodes)]
            run.clock_step_slot = run.main_slots[0]
            run.clock_restart_slots = {5: run.main_slots[min(1, a.nodes - 1)],
                                       3600: run.main_slots[min(2, a.nodes - 1)]}
            for s in run.main_slots:
                fleet.launch(s)
            for p in run.main_procs():
                n = fleet.wait_ready(p, 30)
                if n is None:
                    raise RuntimeError(f"{p.label} not ready within 30 s:\n{p.proc.log_tail()}")
            procs.log("nodes: " + ", ".join(f"{p.label}=node {p.node_ids[-1]} port {p.port}" for p in run.main_procs()))
            status, lj = fleet.get_json(run.main_procs()[-1], "/v1/layout")
            lay = layout.Layout.from_json(lj)
            procs.log(f"layout: {lay.text}")
            run.fault_begin()
            run.fault_end()
            run.await_recovery()
        for label, n in plan:
            with run.scenario(label):
                table[n](run)
        check_decoder(run, lay, fleet.streams, rng)
    except Exception:  # noqa: BLE001 - report what we have, then fail
        traceback.print_exc()
        run.extra.append((run.current or "-", "the run stopped with an exception (above)"))
    finally:
        if not run.windows:  # the registry did not start
            run.windows.append(["start", t_start, time.monotonic()])
            run.info["start"] = {"recovery": None, "note": "", "fault": None}
        run.close()
        procs.log("stopping the nodes and the registry")
        fleet.stop_all()
        try:
            registry.stop()
        except Exception as e:  # noqa: BLE001
            print(f"registry stop: {e!r}", file=sys.stderr)
    procs.log(f"checking {sum(len(st.ids) for st in fleet.streams)} IDs")
    t_check = time.monotonic()
    chk = checker.Checker(lay or layout.Layout.flurry_default(), a.max_lead_ms)
    res = chk.check(fleet.streams, run.windows, fleet.notes, run.extra)
    procs.log(f"checked in {time.monotonic() - t_check:.1f} s")
    wall = time.monotonic() - t_start
    report(a, res, run, wall)
    if a.json:
        write_json(a.json, a, res, run, wall)
    result["ok"] = res.ok
    if a.expect_duplicates:
        found = res.duplicates > 0
        result["ok"] = found  # the work directory goes unless this fails
        print(f"\nRESULT: {'PASS' if found else 'FAIL'} (--expect-duplicates: {res.duplicates} duplicates "
              + ("found, as they must be)" if found else "found: the checker missed them)"), flush=True)
        return 0 if found else 1
    if not res.ok:
        named = set()
        for _, text in res.violations:
            named.update(re.findall(r"\b([nsc]\d+)\.\d+", text))
        for slot in sorted(named)[:6]:
            p = fleet.slots.get(slot)
            if p is not None and p.current is not None:
                print(f"--- last lines of {slot}'s log ({p.current.proc.logpath}) ---")
                print(p.current.proc.log_tail(12))
        print(f"work directory kept: {work} (node logs in {work}/logs)")
    elif keep:
        print(f"work directory kept: {work}")
    return 0 if res.ok else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
