#!/usr/bin/env python3
"""The Kubernetes manifests in deploy/k8s are parsed and their flurry settings checked by flurry.

For each manifest: every document is valid YAML with a kind; each container that runs
`flurry serve` has its arguments and FLURRY_* environment loaded by the real configuration loader
(`flurry serve ARGS --print-config`, which validates every setting and their combinations), and
then:
  * the listen port is the container port the Service and the probes use;
  * the probes ask /readyz (readiness) and /healthz (liveness), which a real server answers;
  * statefulset.yaml: the static registry with the node ID from the pod's host name, replicas
    within the layout's node IDs, a persistent volume at the data directory;
  * deployment-etcd.yaml: the etcd registry with endpoints, a cluster name and the TTL it states.

Usage: k8s_manifests.py FLURRY
"""
import os
import subprocess
import sys
import tomllib

import yaml

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
HERE = os.path.dirname(os.path.abspath(__file__))
MANIFESTS = os.path.join(HERE, "..", "..", "deploy", "k8s")


def fail(msg):
    print("FAIL: " + msg, file=sys.stderr)
    sys.exit(1)


def check(cond, msg):
    if not cond:
        fail(msg)


def load(name):
    with open(os.path.join(MANIFESTS, name)) as f:
        docs = [d for d in yaml.safe_load_all(f) if d is not None]
    for d in docs:
        check(isinstance(d, dict) and "kind" in d and "apiVersion" in d, f"{name}: a document without kind: {d}")
    return docs


def only(docs, kind, name):
    found = [d for d in docs if d["kind"] == kind]
    check(len(found) == 1, f"{name}: expected one {kind}, found {len(found)}")
    return found[0]


def flurry_container(workload, name):
    containers = workload["spec"]["template"]["spec"]["containers"]
    serving = [c for c in containers if c.get("args", [None])[0] == "serve"]
    check(len(serving) == 1, f"{name}: expected one container running `flurry serve`")
    return serving[0]


def effective_config(flurry, container, name):
    env = {k: v for k, v in os.environ.items() if not k.startswith("FLURRY_")}
    for e in container.get("env", []):
        check("value" in e, f"{name}: env {e.get('name')} has no literal value")
        env[e["name"]] = str(e["value"])
    cmd = [flurry] + container["args"] + ["--print-config"]
    p = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=30)
    check(p.returncode == 0, f"{name}: flurry refused the manifest's settings: {p.stderr.strip()}")
    check("warning" not in p.stderr.lower(), f"{name}: configuration warnings: {p.stderr.strip()}")
    return tomllib.loads(p.stdout)


def check_ports_and_probes(container, config, name):
    port = int(config["listen"].rsplit(":", 1)[1])
    ports = {p["name"]: p["containerPort"] for p in container["ports"]}
    check(ports.get("http") == port, f"{name}: container port {ports} is not the listen port {port}")
    check(config["listen"].startswith("0.0.0.0:"), f"{name}: listens on {config['listen']}, unreachable from the Service")
    grpc_port = int(config["grpc_listen"].rsplit(":", 1)[1])
    check(ports.get("grpc") == grpc_port, f"{name}: container port {ports} is not the gRPC port {grpc_port}")
    check(config["grpc_listen"].startswith("0.0.0.0:"),
          f"{name}: gRPC listens on {config['grpc_listen']}, unreachable from the Service")
    ready = container["readinessProbe"]["httpGet"]
    live = container["livenessProbe"]["httpGet"]
    check(ready["path"] == "/readyz" and ready["port"] in ("http", port), f"{name}: readiness probe {ready}")
    check(live["path"] == "/healthz" and live["port"] in ("http", port), f"{name}: liveness probe {live}")


def check_service(docs, name):
    svc = [d for d in docs if d["kind"] == "Service" and d["spec"].get("clusterIP") != "None"]
    check(len(svc) == 1, f"{name}: expected one client Service")
    check(svc[0]["spec"]["ports"][0]["targetPort"] == "http", f"{name}: the Service does not target the http port")


def main():
    flurry = os.path.abspath(sys.argv[1])
    name = "statefulset.yaml"
    docs = load(name)
    sts = only(docs, "StatefulSet", name)
    c = flurry_container(sts, name)
    config = effective_config(flurry, c, name)
    check(config["registry"] == "static" and config["node_from_hostname"] is True, f"{name}: {config}")
    check(1 <= sts["spec"]["replicas"] <= 1024, f"{name}: replicas beyond the layout's 1024 node IDs")
    mounts = {m["name"]: m["mountPath"] for m in c["volumeMounts"]}
    claims = {t["metadata"]["name"] for t in sts["spec"]["volumeClaimTemplates"]}
    # A subdirectory of the volume: flurry creates it 0700, while a volume's root is often shared
    # with a group (fsGroup) or writable by all (emptyDir), which flurry refuses.
    check(any(config["data_dir"].startswith(m.rstrip("/") + "/") for m in mounts.values()),
          f"{name}: the data directory {config['data_dir']} is not a subdirectory of a volume")
    check(set(mounts) <= claims, f"{name}: the state volume is not persistent (claims {claims})")
    check_ports_and_probes(c, config, name)
    check_service(docs, name)
    headless = [d for d in docs if d["kind"] == "Service" and d["spec"].get("clusterIP") == "None"]
    check(len(headless) == 1 and headless[0]["metadata"]["name"] == sts["spec"]["serviceName"],
          f"{name}: the governing headless Service is missing")

    name = "deployment-etcd.yaml"
    docs = load(name)
    dep = only(docs, "Deployment", name)
    c = flurry_container(dep, name)
    config = effective_config(flurry, c, name)
    check(config["registry"] == "etcd", f"{name}: registry {config['registry']}")
    endpoints = config["etcd_endpoints"]
    endpoints = endpoints if isinstance(endpoints, list) else endpoints.split(",")
    check(len(endpoints) == 3, f"{name}: endpoints {endpoints}")
    check(config["cluster"] == "orders", f"{name}: cluster {config['cluster']}")
    check(config["lease_ttl_ms"] == 10000, f"{name}: lease_ttl_ms {config['lease_ttl_ms']}")
    check_ports_and_probes(c, config, name)
    check_service(docs, name)
    print("PASS")


if __name__ == "__main__":
    main()
