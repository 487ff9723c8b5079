#!/usr/bin/python3
"""examples/grpc_ids.py, the documented first gRPC call (docs/clients.md), against the real
`flurry serve`, run as a user runs it (Debian's python3, the stubs the build generated):

  * health SERVING, 5 IDs, unique and increasing, of the server's node, and the first decoded to
    that node; IDs the server issues afterwards over HTTP are all above them;
  * --list names flurry.v1.Ids, Segments, OrderNumbers and grpc.health.v1.Health (reflection);
  * a count above max_batch: exit 1, INVALID_ARGUMENT with flurry-reason=BAD_INPUT on stderr,
    no traceback; -n 0: exit 2 (refused by the example itself);
  * with the ids scope closed (open_scopes = read): UNAUTHENTICATED without --token-file, IDs
    with it.

Usage: grpc_example.py FLURRY PYTHON_STUBS
"""
import os
import re
import subprocess
import sys

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import grpclib as g  # noqa: E402

EXAMPLE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "examples", "grpc_ids.py")
STUBS = os.path.realpath(sys.argv[2]) if len(sys.argv) > 2 else ""
h = g.init()
COUNT = 5


def example(port, *args):
    """Runs the example as documented; returns (exit code, stdout, stderr)."""
    p = subprocess.run(["/usr/bin/python3", EXAMPLE, "--target", f"127.0.0.1:{port}", "--stubs", STUBS,
                        *[str(a) for a in args]],
                       capture_output=True, text=True, timeout=60, cwd=h.WORK, stdin=subprocess.DEVNULL)
    return p.returncode, p.stdout, p.stderr


def ids_and_decode(what, port, *args):
    rc, out, err = example(port, "-n", COUNT, *args)
    h.check(rc == 0, f"{what}: exit {rc}: {out}{err}")
    h.check(out.startswith("health: SERVING\n"), f"{what}: no 'health: SERVING' first: {out!r}")
    ids = [int(m) for m in re.findall(r"^id: (\d+)$", out, re.M)]
    h.check(len(ids) == COUNT, f"{what}: {len(ids)} IDs, not {COUNT}: {out!r}")
    h.check_increasing(ids, what)
    m = re.search(r"^decoded: node=(\d+) time=(\S+) seq=(\d+)$", out, re.M)
    h.check(m is not None, f"{what}: no decoded line: {out!r}")
    return ids, int(m.group(1))


def main():
    srv, port = g.start("server", os.path.join(h.WORK, "data"))
    ids, node = ids_and_decode("grpc_ids.py", port)
    h.check(node == srv.node, f"decoded node {node}, the server's is {srv.node}")
    for id_ in ids:
        h.check(h.node_of(id_) == srv.node, f"ID {id_} is not of node {srv.node}")
    later = h.get_ids(srv.port, 100)
    h.check(min(later) > max(ids), f"the server issued {min(later)} after the example's {max(ids)}")
    h.log(f"example: {COUNT} IDs of node {node}, {ids[0]}..{ids[-1]}; 100 later ones above them")

    rc, out, err = example(port, "--list")
    h.check(rc == 0, f"--list: exit {rc}: {err}")
    services = set(out.split())
    for name in ("flurry.v1.Ids", "flurry.v1.Segments", "flurry.v1.OrderNumbers", "grpc.health.v1.Health"):
        h.check(name in services, f"--list does not name {name}: {out!r}")

    rc, out, err = example(port, "-n", 10**9)
    h.check(rc == 1 and "INVALID_ARGUMENT" in err and "flurry-reason=BAD_INPUT" in err
            and "Traceback" not in err and "id:" not in out,
            f"-n 10^9: exit {rc}, stdout {out!r}, stderr {err!r}")
    rc, out, err = example(port, "-n", 0)
    h.check(rc == 2 and "Traceback" not in err, f"-n 0: exit {rc}, stderr {err!r}")
    rc, _, err = example(port, "--stubs", os.path.join(h.WORK, "nowhere"))
    h.check(rc == 1 and "flurry_grpc_python" in err, f"no stubs: exit {rc}, stderr {err!r}")
    srv.stop()

    token_file = os.path.join(h.WORK, "tokens")
    with open(token_file, "w") as f:
        f.write(f"{g.TOKEN} ids,read\n")
    os.chmod(token_file, 0o600)
    client_token = os.path.join(h.WORK, "client-token")
    with open(client_token, "w") as f:
        f.write(g.TOKEN + "\n")
    closed, port = g.start("closed", os.path.join(h.WORK, "data"),
                           ["--token-file", token_file, "--open-scopes", "read"])
    rc, out, err = example(port)
    h.check(rc == 1 and "UNAUTHENTICATED" in err and "id:" not in out,
            f"closed ids scope, no token: exit {rc}, stdout {out!r}, stderr {err!r}")
    ids_and_decode("with --token-file", port, "--token-file", client_token)
    closed.stop()


h.run_main(main)
