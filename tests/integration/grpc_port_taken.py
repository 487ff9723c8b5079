#!/usr/bin/python3
"""A second `flurry serve` on a gRPC port another one listens on must not start.

gRPC sets SO_REUSEPORT on its listeners unless told otherwise; with it a second server on the
same HOST:PORT started and the kernel shared new connections between the two (of 20, 11 reached
one and 9 the other). The first server listens on 127.0.0.1:P; a second one with
--grpc-listen 127.0.0.1:P must exit non-zero naming grpc_listen and the address, and every
connection afterwards must reach the first (its node ID in Ids.Layout).

Usage: grpc_port_taken.py FLURRY PYTHON_STUBS
"""
import os
import subprocess
import sys

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import grpclib as g  # noqa: E402

h = g.init()
pb = g.pb


def layout_nodes(port):
    """{node: connections} of 20 new connections' Ids.Layout."""
    nodes = {}
    for _ in range(20):
        ch = g.grpc.insecure_channel(f"127.0.0.1:{port}",
                                     options=[("grpc.use_local_subchannel_pool", 1)])
        n = g.rpc.IdsStub(ch).Layout(pb.LayoutRequest(), timeout=10).node
        nodes[n] = nodes.get(n, 0) + 1
        ch.close()
    return nodes


def main():
    # A SQLite registry of its own per server, so the two would get different node IDs.
    first, port = g.start("first", os.path.join(h.WORK, "first"))
    node = first.node
    second = os.path.join(h.WORK, "second.log")
    with open(second, "wb") as log:
        p = subprocess.Popen([h.FLURRY, "serve", "--listen", f"127.0.0.1:{h.free_port()}",
                              "--data-dir", os.path.join(h.WORK, "second"), "--grpc-listen",
                              f"127.0.0.1:{port}"], stdout=log, stderr=subprocess.STDOUT)
    try:
        rc = p.wait(timeout=30)
    except subprocess.TimeoutExpired:
        rc = None
    err = open(second, encoding="utf-8", errors="replace").read()
    if rc is None:  # it started: see where new connections go, then stop it
        nodes = layout_nodes(port)
        p.terminate()
        p.wait(timeout=30)
        h.fail(f"a second server started on the taken gRPC port {port}; 20 new connections "
               f"reached nodes {nodes} (the first server is {node})")
    h.log(f"second server on 127.0.0.1:{port}: exit {rc}: {err.strip().splitlines()[-1:]}")
    h.check(rc != 0, f"the second server exited {rc}")
    h.check(f"grpc_listen 127.0.0.1:{port}" in err, f"the refusal does not name the address: {err[-500:]!r}")
    # Every new connection reaches the first server.
    nodes = layout_nodes(port)
    h.check(nodes == {node: 20}, f"20 connections reached nodes {nodes}, the first server is {node}")
    rc, _ = first.stop()
    h.check(rc == 0, f"exit code {rc} after SIGTERM")


if __name__ == "__main__":
    h.run_main(main)
