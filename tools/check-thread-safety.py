#!/usr/bin/env python3
"""Proves the lock discipline of src/ and apps/ with clang's thread-safety analysis.

Every translation unit of src/ and apps/ in BUILD_DIR/compile_commands.json that includes
include/flurry/mutex.h (directly or through the project's headers; the others declare no guarded
state, so compiling them would prove nothing) is compiled with
    clang++ <its flags> -fsyntax-only -Wthread-safety -Werror=thread-safety
in parallel (one job a CPU). Each violation is printed once as `file:line:col: message`, with
clang's notes under it, paths relative to the source tree; the exit code is 1 when there is any
violation or a unit clang cannot compile, 0 otherwise. The other warnings clang would add to g++'s
flags are not this check's business and are switched off.

Usage: tools/check-thread-safety.py [--build-dir DIR] [--jobs N] [--only REGEX] [--all]
                                   [--file F ...] [--verbose]
  --build-dir  the configured CMake tree (default: build/release); its compile_commands.json and
               generated headers are used, so the tree must have been built.
  --all        checks the units that do not include mutex.h too (to compare the cost).
  --only REGEX checks only the units whose path from the source tree matches REGEX.
  --file F     checks F instead of the tree, compiled with the flags of a unit of src/core (for
               a file outside the build, e.g. tests/static/planted_thread_safety_violation.cc).
"""

import argparse
import concurrent.futures
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MUTEX_H = os.path.join(ROOT, "include", "flurry", "mutex.h")
CHECKED_DIRS = ("src", "apps", "clients")  # clients: the C++ client (clients/cpp)
INCLUDE_RE = re.compile(r'^\s*#\s*include\s*([<"])([^>"]+)[>"]', re.M)
# A diagnostic line of clang's: path:line:col: severity: message [-Wflag].
DIAG_RE = re.compile(r"^(?P<path>[^:\s][^:]*):(?P<line>\d+):(?P<col>\d+): "
                     r"(?P<sev>error|warning|note|fatal error): (?P<msg>.*)$")
# g++ options clang rejects or would turn into noise; the check needs only the preprocessor's
# flags (-I, -D, -std, -isystem ...), so dropping an option changes nothing it proves.
DROP_EXACT = {"-c", "-MD", "-MMD", "-fno-semantic-interposition", "-fconcepts-diagnostics-depth"}
DROP_WITH_VALUE = {"-o", "-MF", "-MT", "-MQ"}
DROP_PREFIX = ("-fconcepts-diagnostics-depth=", "-fsanitize", "-fno-sanitize", "-flto",
               "-fdiagnostics-color", "-Werror", "-W", "-fcf-protection", "-fstack-clash")


def clang_args(entry):
    """The compile command of a compile_commands.json entry, as a clang syntax-only check."""
    argv = entry["arguments"] if "arguments" in entry else shlex.split(entry["command"])
    out = ["clang++"]
    skip = False
    for arg in argv[1:]:
        if skip:
            skip = False
            continue
        if arg in DROP_WITH_VALUE:
            skip = True
            continue
        if arg in DROP_EXACT or arg.startswith(DROP_PREFIX):
            continue
        if not arg.startswith("-") and arg.endswith((".cc", ".cpp", ".cxx")):  # the source
            continue
        out.append(arg)
    # Only the thread-safety warnings, as errors: -Wno-everything first, then the group.
    out += ["-fsyntax-only", "-fno-color-diagnostics", "-Wno-everything", "-Wthread-safety",
            "-Werror=thread-safety", entry["file"]]
    return out


def include_dirs(args):
    """The directories a unit's quoted and angled includes are looked up in, in order."""
    dirs = []
    for i, arg in enumerate(args):
        for flag in ("-I", "-isystem", "-iquote"):
            if arg == flag and i + 1 < len(args):
                dirs.append(args[i + 1])
            elif arg.startswith(flag) and len(arg) > len(flag):
                dirs.append(arg[len(flag):])
    return [d if os.path.isabs(d) else os.path.normpath(os.path.join(ROOT, d)) for d in dirs]


class IncludeScan:
    """Whether a file reaches mutex.h through project headers (system headers are not followed:
    they never include it). Results are cached per (file, include path)."""

    def __init__(self):
        self.includes = {}
        self.reaches = {}

    def _includes_of(self, path):
        if path not in self.includes:
            try:
                with open(path, encoding="utf-8", errors="replace") as f:
                    self.includes[path] = INCLUDE_RE.findall(f.read())
            except OSError:
                self.includes[path] = []
        return self.includes[path]

    def reaches_mutex(self, path, dirs):
        key = (path, dirs)
        if key in self.reaches:
            return self.reaches[key]
        self.reaches[key] = False  # a cycle reaches nothing new
        result = False
        for kind, name in self._includes_of(path):
            candidates = ([os.path.dirname(path)] if kind == '"' else []) + list(dirs)
            for d in candidates:
                found = os.path.normpath(os.path.join(d, name))
                if os.path.isfile(found):
                    if found == MUTEX_H or (found.startswith(ROOT + os.sep) and
                                            self.reaches_mutex(found, dirs)):
                        result = True
                    break
            if result:
                break
        self.reaches[key] = result
        return result


def relative(path):
    path = os.path.normpath(path)
    return os.path.relpath(path, ROOT) if path.startswith(ROOT + os.sep) else path


def in_scope(path):
    """Whether a unit of the database is one of src/ or apps/: their own sources, and the batches
    of a CMake unity build (UNITY_BUILD: build/.../Unity/unity_N_cxx.cxx, which #include them)."""
    if not path.endswith((".cc", ".cpp", ".cxx")):
        return False
    if relative(path).split(os.sep)[0] in CHECKED_DIRS:
        return True
    if os.sep + "Unity" + os.sep not in path:
        return False
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            included = [name for _, name in INCLUDE_RE.findall(f.read())]
    except OSError:
        return False
    return any(relative(name).split(os.sep)[0] in CHECKED_DIRS for name in included
               if os.path.isabs(name))


def check(entry):
    """Compiles one unit; returns (unit, exit code, clang's output)."""
    proc = subprocess.run(clang_args(entry), cwd=entry["directory"], stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, text=True)
    return entry["file"], proc.returncode, proc.stdout


def violations(output, directory):
    """clang's thread-safety diagnostics in one unit's output: a list of (key, text) where text is
    the error line and its notes, paths made relative to the source tree."""
    found = []
    current = None
    for line in output.splitlines():
        m = DIAG_RE.match(line)
        if not m:
            continue
        path = m["path"] if os.path.isabs(m["path"]) else os.path.join(directory, m["path"])
        text = f"{relative(path)}:{m['line']}:{m['col']}: {m['msg']}"
        if m["sev"] == "note":
            if current is not None:
                current[1].append("    note: " + text)
            continue
        current = ((relative(path), int(m["line"]), int(m["col"]), m["msg"]), [text])
        found.append(current)
    return found


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--build-dir", default=os.path.join(ROOT, "build", "release"))
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--file", action="append", default=[])
    parser.add_argument("--all", action="store_true",
                        help="check every unit, also those that do not include flurry/mutex.h")
    parser.add_argument("--only", metavar="REGEX",
                        help="check only the units whose path (from the source tree) matches")
    parser.add_argument("--verbose", action="store_true")
    opts = parser.parse_args()

    if shutil.which("clang++") is None:
        print("check-thread-safety: clang++ not found (apt install clang)", file=sys.stderr)
        return 2
    db_path = os.path.join(opts.build_dir, "compile_commands.json")
    try:
        with open(db_path, encoding="utf-8") as f:
            database = json.load(f)
    except OSError as e:
        print(f"check-thread-safety: cannot read {db_path}: {e.strerror} (configure and build "
              "the tree first)", file=sys.stderr)
        return 2

    started = time.monotonic()
    scan = IncludeScan()
    in_tree = [e for e in database if in_scope(e["file"])]
    if opts.file:
        template = next((e for e in in_tree if relative(e["file"]).startswith("src/core/")), None)
        if template is None:
            print("check-thread-safety: no unit of src/core in " + db_path, file=sys.stderr)
            return 2
        units = [dict(template, file=os.path.abspath(f)) for f in opts.file]
    else:
        units = [e for e in in_tree if opts.all or
                 scan.reaches_mutex(e["file"], tuple(include_dirs(clang_args(e))))]
    if opts.only:
        units = [e for e in units if re.search(opts.only, relative(e["file"]))]
    if opts.verbose:
        for e in units:
            print("check-thread-safety: checking " + relative(e["file"]))

    seen = {}
    broken = []
    with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, opts.jobs)) as pool:
        for unit, code, output in pool.map(check, units):
            found = violations(output, os.path.dirname(unit))
            thread_safety = [v for v in found if "-Wthread-safety" in v[0][3]]
            for key, text in thread_safety:
                seen.setdefault(key, text)
            if code != 0 and not thread_safety:
                broken.append((unit, output))

    for key in sorted(seen):
        print("\n".join(seen[key]))
    for unit, output in broken:
        print(f"{relative(unit)}: clang cannot compile this unit, so it is not checked:")
        print(output.rstrip())
    elapsed = time.monotonic() - started
    what = (f"{len(units)} file(s) given checked" if opts.file else
            f"{len(units)} of {len(in_tree)} units of src/ and apps/ checked" +
            ("" if opts.all else " (the ones that include flurry/mutex.h)"))
    print(f"check-thread-safety: {len(seen)} violation(s), {len(broken)} unit(s) clang could not "
          f"compile; {what} in {elapsed:.1f} s with {opts.jobs} job(s)")
    return 1 if seen or broken else 0


if __name__ == "__main__":
    sys.exit(main())
