#!/usr/bin/env python3
"""Checks that every #include in the libraries points down the layers (docs/architecture.md,
"Layers"), and never into another library's private headers.

The libraries and what each may include (besides itself and the public API in include/flurry/,
whose headers belong to the library that implements them, table PUBLIC below), bottom first:

    core        (nothing)            db, tls, order, reference: core
    registry    db, tls              segment: db
    service     registry, segment    ops: service, order
    http        ops, tls             grpc: ops, tls
    app         http, grpc, db       cli (apps/flurry): everything; client (clients/cpp): tls

"May include" is transitive: http may include what ops may. A library's headers for the layers
above live in src/<lib>/include/<lib>/ (grpc: include/grpc_api/; the core's shared helpers in
src/core/include/core/, the target flurry::core_internal); everything else in src/<lib>/ is
private to it. CMake gives each library only its own folder and the include/ folders of what it
links (cmake/FlurryLayers.cmake), so most mistakes do not compile; this check also catches the
ones a build would let through (a spelling with "..", a header reached through a library's
public include root that the layering forbids), and prints the graph.

Each violation is printed as `file:line: message`; the exit code is 1 when there is one.
Usage: tools/check-layers.py [--root DIR] [--graph] [--as LIB FILE ...]
  --root   the source tree (default: this script's parent's parent)
  --graph  also prints the library graph the includes make (edges with a count)
  --as LIB FILE  checks FILE as if it were a source of LIB (the planted-violation test)
"""

import argparse
import os
import re
import sys
from pathlib import Path

ALLOWED = {
    'core': [],
    'db': ['core'],
    'tls': ['core'],
    'order': ['core'],
    'reference': ['core'],
    'registry': ['core', 'db', 'tls'],
    'tso': ['registry'],
    'segment': ['core', 'db'],
    'service': ['registry', 'segment'],
    'ops': ['service', 'order', 'tso'],
    'http': ['ops', 'tls'],
    'grpc': ['ops', 'tls'],
    'app': ['http', 'grpc', 'db'],
    'client': ['core', 'tls'],
    'cli': ['app', 'reference'],
}
# The installed headers (include/flurry/) by the library that implements them; the rest: core.
PUBLIC = {
    'registry.h': 'registry', 'lease_keeper.h': 'registry', 'node_session.h': 'registry',
    'open_registry.h': 'registry', 'horizon_floor.h': 'registry', 'host_guard.h': 'registry',
    'timestamp_oracle.h': 'tso',
    'segment_service.h': 'segment', 'segment_store.h': 'segment',
    'order_number.h': 'order', 'ff1.h': 'order', 'client.h': 'client',
}
INTERFACE_DIR = {'grpc': 'grpc_api'}
INCLUDE_RE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)


def closure(lib):
    seen, todo = set(), [lib]
    while todo:
        for dep in ALLOWED.get(todo.pop(), []):
            if dep not in seen:
                seen.add(dep)
                todo.append(dep)
    if lib == 'cli':
        seen |= set(ALLOWED)  # the composition root sees every layer
    return seen


def library_of(root, path):
    rel = path.relative_to(root)
    parts = rel.parts
    if parts[0] == 'src' and len(parts) > 2:
        return parts[1]
    if parts[:2] == ('apps', 'flurry'):
        return 'cli'
    if parts[:2] == ('clients', 'cpp'):
        return 'client'
    if parts[:2] == ('include', 'flurry'):
        return PUBLIC.get(rel.name, 'core')
    return None


def resolve(root, includer, lib, spelled):
    """(path, kind): kind is 'self', 'public', 'interface' or 'private'; None when not found."""
    candidates = [includer.parent / spelled]
    if lib in ALLOWED and lib not in ('cli', 'client'):
        candidates.append(root / 'src' / lib / spelled)
    elif lib == 'cli':
        candidates.append(root / 'apps' / 'flurry' / spelled)
    elif lib == 'client':
        candidates.append(root / 'clients' / 'cpp' / 'src' / spelled)
    for c in candidates:
        if c.is_file():
            return c.resolve(), 'self'
    public = root / 'include' / spelled
    if public.is_file():
        return public.resolve(), 'public'
    for other in sorted((root / 'src').iterdir()):
        iface = other / 'include' / spelled
        if iface.is_file():
            return iface.resolve(), 'interface'
    # Not reachable through any include root: a private header spelled from outside.
    head = spelled.split('/', 1)
    if len(head) == 2 and (root / 'src' / head[0] / head[1]).is_file():
        return (root / 'src' / head[0] / head[1]).resolve(), 'private'
    for other in sorted((root / 'src').iterdir()):
        if (other / spelled).is_file():
            return (other / spelled).resolve(), 'private'
    return None, None


def sources(root):
    for top in ('src', 'apps/flurry', 'clients/cpp/src'):
        for p in sorted((root / top).rglob('*')):
            if p.suffix in ('.h', '.cc') and p.is_file():
                yield p


def main():
    ap = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    ap.add_argument('--root', default=Path(__file__).resolve().parent.parent, type=Path)
    ap.add_argument('--graph', action='store_true')
    ap.add_argument('--as', dest='as_lib', nargs=2, action='append', default=[],
                    metavar=('LIB', 'FILE'))
    args = ap.parse_args()
    root = args.root.resolve()
    files = [(p, library_of(root, p)) for p in sources(root)]
    files += [(Path(f).resolve(), lib) for lib, f in args.as_lib]
    if args.as_lib:
        files = [(Path(f).resolve(), lib) for lib, f in args.as_lib]
    violations, edges = [], {}
    for path, lib in files:
        if lib is None:
            continue
        allowed = closure(lib) | {lib}
        text = path.read_text(errors='replace')
        for m in INCLUDE_RE.finditer(text):
            spelled = m.group(1)
            line = text.count('\n', 0, m.start()) + 1
            where = f'{os.path.relpath(path, root)}:{line}'
            if '..' in Path(spelled).parts:
                violations.append(f'{where}: "{spelled}" climbs out with "..": include it from '
                                  'its library\'s include root')
                continue
            target, kind = resolve(root, path, lib, spelled)
            if target is None:
                continue  # a system or generated header (flurry/v1/flurry.pb.h, ...)
            owner = library_of(root, target)
            if owner is None or owner == lib:
                continue
            if kind == 'private':
                violations.append(f'{where}: "{spelled}" is a private header of {owner} '
                                  f'(only src/{owner}/include/ is for other libraries)')
                continue
            edges[(lib, owner)] = edges.get((lib, owner), 0) + 1
            if owner not in allowed:
                violations.append(f'{where}: {lib} may not include {owner} ("{spelled}"): '
                                  f'{owner} is not below {lib} (tools/check-layers.py, ALLOWED)')
    if args.graph:
        for (a, b), n in sorted(edges.items()):
            print(f'{a} -> {b}  ({n} includes)')
    for v in violations:
        print(v)
    if not args.as_lib:
        print(f'check-layers: {len(files)} files, {sum(edges.values())} includes across '
              f'libraries, {len(violations)} violations', file=sys.stderr)
    return 1 if violations else 0


if __name__ == '__main__':
    sys.exit(main())
