#!/usr/bin/python3
"""A first gRPC call to flurry, with no grpcurl: IDs from Ids.Next, the first one decoded.

Needs Debian's python3-grpcio and python3-protobuf (apt-get install python3-grpcio
python3-protobuf) and the Python stubs that the build generates from proto/ into
<build>/python (the target flurry_grpc_python, built with the server: `make run` builds
build/server/python). Run it against a server, e.g. the one `make run` starts (gRPC on
127.0.0.1:7610):

    python3 examples/grpc_ids.py                    # health, then 3 IDs and the first one decoded
    python3 examples/grpc_ids.py -n 10 --target 10.0.0.5:7610 --token-file ~/.flurry-token
    python3 examples/grpc_ids.py --list             # the services, by server reflection

Prints `health: SERVING`, one ID per line as `id: N`, then `decoded: node=N time=ISO-8601
seq=N`. On an RPC error it prints the gRPC code, the message and flurry's reason and
retry-after-ms (docs/operations.md) on stderr and exits 1; exits 2 on a bad argument.
"""
import argparse
import os
import sys

sys.dont_write_bytecode = True  # no __pycache__ beside the stubs

HERE = os.path.dirname(os.path.abspath(__file__))
# Where the build puts the stubs: the `server` preset's tree (make run), then the `release` one's.
DEFAULT_STUBS = [os.path.join(HERE, "..", "build", preset, "python") for preset in ("server", "release")]


def positive(text):
    n = int(text)
    if n < 1:
        raise argparse.ArgumentTypeError(f"{text} is not a whole number of at least 1")
    return n


def parse_args():
    p = argparse.ArgumentParser(description="Ask flurry for IDs over gRPC.")
    p.add_argument("--target", default="127.0.0.1:7610", help="the server's gRPC HOST:PORT (default %(default)s)")
    p.add_argument("-n", "--count", type=positive, default=3, help="how many IDs (default %(default)s)")
    p.add_argument("--token-file", help="a file holding a bearer token (when the ids scope is not open)")
    p.add_argument("--stubs", help="the directory of the generated stubs (default: build/server/python, "
                   "then build/release/python)")
    p.add_argument("--list", action="store_true", help="list the services by server reflection and exit")
    p.add_argument("--timeout", type=float, default=10.0, help="each call's deadline in seconds (default %(default)s)")
    return p.parse_args()


def import_stubs(directory):
    candidates = [directory] if directory else DEFAULT_STUBS
    for d in candidates:
        if os.path.isfile(os.path.join(d, "flurry", "v1", "flurry_pb2.py")):
            sys.path.insert(0, os.path.realpath(d))
            break
    else:
        sys.exit(f"grpc_ids.py: no generated stubs in {', '.join(candidates)}: build them with "
                 "`cmake --build --preset server --target flurry_grpc_python` (or pass --stubs DIR)")
    try:
        import grpc  # noqa: F401
    except ImportError:
        sys.exit(f"grpc_ids.py: {sys.executable} has no grpc module: apt-get install python3-grpcio "
                 "python3-protobuf, and run it with Debian's /usr/bin/python3")


def report(call, err):
    """An RPC error as flurry sends it: the code, the message, and its reason and retry hint."""
    trailers = {k: v for k, v in (err.trailing_metadata() or ()) if k in ("flurry-reason", "retry-after-ms")}
    extra = "".join(f" {k}={v}" for k, v in sorted(trailers.items()))
    print(f"grpc_ids.py: {call}: {err.code().name}: {err.details()}{extra}", file=sys.stderr)
    return 1


def main():
    args = parse_args()
    import_stubs(args.stubs)
    import grpc
    from flurry.v1 import flurry_pb2, flurry_pb2_grpc
    from stdgrpc.health.v1 import health_pb2, health_pb2_grpc
    from stdgrpc.reflection.v1alpha import reflection_pb2, reflection_pb2_grpc

    metadata = None
    if args.token_file:
        with open(args.token_file) as f:
            metadata = [("authorization", f"Bearer {f.read().strip()}")]
    with grpc.insecure_channel(args.target) as channel:
        if args.list:
            stub = reflection_pb2_grpc.ServerReflectionStub(channel)
            request = reflection_pb2.ServerReflectionRequest(list_services="")
            try:
                for answer in stub.ServerReflectionInfo(iter([request]), timeout=args.timeout, metadata=metadata):
                    for service in answer.list_services_response.service:
                        print(service.name)
            except grpc.RpcError as err:
                return report("ServerReflectionInfo", err)
            return 0
        try:
            health = health_pb2_grpc.HealthStub(channel).Check(
                health_pb2.HealthCheckRequest(service="flurry.v1.Ids"), timeout=args.timeout)
        except grpc.RpcError as err:
            return report("Health.Check", err)
        print("health:", health_pb2.HealthCheckResponse.ServingStatus.Name(health.status))

        ids = flurry_pb2_grpc.IdsStub(channel)
        try:
            answer = ids.Next(flurry_pb2.NextRequest(count=args.count), timeout=args.timeout, metadata=metadata)
        except grpc.RpcError as err:
            return report("Ids.Next", err)
        for id_ in answer.ids:
            print("id:", id_)
        try:
            decoded = ids.Decode(flurry_pb2.DecodeRequest(id=str(answer.ids[0])), timeout=args.timeout,
                                 metadata=metadata)
        except grpc.RpcError as err:
            return report("Ids.Decode", err)
        print(f"decoded: node={decoded.node} time={decoded.time} seq={decoded.seq}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
