#!/usr/bin/python3
"""The Debian packages (cmake/FlurryPackaging.cmake) and the systemd units in them, with the real
cpack, dpkg-deb, lintian and systemd-analyze. One check per ctest test (tests/deb/CMakeLists.txt):

  cpack     makes flurry_*.deb and libflurry-dev_*.deb from the build tree (the fixture)
  lintian   no error on either package, and no warning but those in ACCEPTED_WARNINGS
  contents  control files (conffiles, maintainer scripts 0755), file list, owners and modes,
            stripped ELF files, Depends: naming the package of every library they link
  systemd   systemd-analyze verify on both units in the unpacked package, and the exposure of
            systemd-analyze security --offline=true at most MAX_EXPOSURE
  scripts   postinst, prerm and postrm through install, upgrade, remove and purge (the admin
            token made once and removed on purge, the unit enabled and disabled, the state kept)
  syscalls  the unpacked server under strace as an unprivileged user: every system call it makes
            is one flurry.service's SystemCallFilter= allows
  serve     the unpacked binary: --version, serve --print-config and serve with the packaged
            config (a temporary state directory and free ports), its modules loaded from the
            unpacked tree, /readyz and /v1/ids answered, a clean stop on SIGTERM

Usage: package_test.py CHECK --debs DIR --cpack CPACK --config CPackConfig.cmake --harness DIR
"""
import argparse
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time

sys.dont_write_bytecode = True  # no __pycache__ in the source tree

PACKAGES = ("flurry", "libflurry-dev")
MAX_EXPOSURE = 2.0
UNITS = ("flurry.service", "flurry@.service")

# Warnings lintian may give, each with why it is accepted. Any other warning, and any error,
# fails the test. Informational tags are not checked; those it gives are hardening-no-fortify-
# functions (-D_FORTIFY_SOURCE would change the release build's compile flags, so a full rebuild
# of every preset; the link is hardened: -z relro -z now), binary-has-unneeded-section .comment
# (the compiler's version string, which CPack's strip keeps), spelling-error-in-binary (false
# positives: "unknow", "mor" are cut ends of string literals the linker merged) and package-supports-alternative-init-but-no-init.d-script (systemd only).
ACCEPTED_WARNINGS = {
    # Debian's archive has no flurry, so no ITP bug for the first entry to close.
    ("flurry", "initial-upload-closes-no-bugs"): "not uploaded to Debian: no ITP bug to close",
    ("libflurry-dev", "initial-upload-closes-no-bugs"): "not uploaded to Debian: no ITP bug to close",
}


def log(msg):
    print(msg, flush=True)


def fail(msg):
    print(f"FAIL: {msg}", file=sys.stderr, flush=True)
    sys.exit(1)


def run(cmd, check=True, **kw):
    p = subprocess.run(cmd, capture_output=True, text=True, **kw)
    if check and p.returncode != 0:
        fail(f"{' '.join(cmd)}: exit {p.returncode}\n{p.stdout}{p.stderr}")
    return p


def find_debs(directory):
    debs = {}
    for pkg in PACKAGES:
        found = sorted(f for f in os.listdir(directory) if re.fullmatch(rf"{re.escape(pkg)}_[^_]+_[^_]+\.deb", f))
        if len(found) != 1:
            fail(f"expected one {pkg}_*.deb in {directory}, found {found} (did package_cpack run?)")
        debs[pkg] = os.path.join(directory, found[0])
    return debs


def project_version(config):
    with open(config) as f:
        m = re.search(r'set\(CPACK_PACKAGE_VERSION "([^"]+)"\)', f.read())
    if not m:
        fail(f"no CPACK_PACKAGE_VERSION in {config}")
    return m.group(1)


def unpack(deb, root):
    run(["dpkg-deb", "-x", deb, root])
    return root


def check_cpack(args):
    os.makedirs(args.debs, exist_ok=True)
    for f in os.listdir(args.debs):
        if f.endswith(".deb"):
            os.remove(os.path.join(args.debs, f))
    t0 = time.monotonic()
    run([args.cpack, "-G", "DEB", "--config", args.config, "-B", args.debs])
    elapsed = time.monotonic() - t0
    for pkg, path in find_debs(args.debs).items():
        log(f"{path}: {os.path.getsize(path)} bytes")
    log(f"cpack: {elapsed:.1f} s")


def check_lintian(args):
    debs = find_debs(args.debs)
    t0 = time.monotonic()
    # Both packages in one run (lintian's start-up is most of its time). The default display level:
    # errors and warnings.
    p = run(["lintian", "--no-cfg", *debs.values()], check=False)
    log(f"lintian: {time.monotonic() - t0:.1f} s, exit {p.returncode}")
    out = p.stdout + p.stderr
    if "Skipping" in out or "No packages selected" in out:
        fail(f"lintian did not read the packages:\n{out}")
    problems = []
    for line in p.stdout.splitlines():
        m = re.match(r"([EWIXPO]): (\S+?)(?: \w+)?: (\S+)", line)
        if not m:
            continue
        level, pkg, tag = m.groups()
        if level == "E":
            problems.append(f"error: {line}")
        elif level == "W":
            why = ACCEPTED_WARNINGS.get((pkg, tag))
            if why:
                log(f"accepted: {line} ({why})")
            else:
                problems.append(f"unexpected warning: {line}")
    if p.returncode not in (0, 2) and not problems:
        problems.append(f"lintian exit {p.returncode}:\n{out}")
    if problems:
        fail("lintian:\n  " + "\n  ".join(problems))


def deb_field(deb, field):
    return run(["dpkg-deb", "-f", deb, field]).stdout.strip()


def depends_names(deb):
    names = set()
    for alternative in deb_field(deb, "Depends").split(","):
        for choice in alternative.split("|"):
            name = choice.strip().split(" ")[0].split(":")[0]
            if name:
                names.add(name)
    return names


def elf_files(root):
    out = []
    for d, _, files in os.walk(root):
        for f in files:
            path = os.path.join(d, f)
            if os.path.islink(path) or not os.path.isfile(path):
                continue
            with open(path, "rb") as fh:
                if fh.read(4) == b"\x7fELF":
                    out.append(path)
    return sorted(out)


def check_linked_packages(deb, root):
    """Every library an ELF file of the package links (DT_NEEDED) belongs to a package that
    Depends: names."""
    depends = depends_names(deb)
    needed_paths = {}
    for elf in elf_files(root):
        needed = re.findall(r"\(NEEDED\)\s+Shared library: \[([^\]]+)\]", run(["readelf", "-d", elf]).stdout)
        resolved = {}
        for line in run(["ldd", elf]).stdout.splitlines():
            m = re.match(r"\s*(\S+) => (\S+)", line) or re.match(r"\s*((/\S+))", line)
            if m:  # "libx.so.1 => /path (0x...)", or the loader: "/lib64/ld-linux....so.2 (0x...)"
                resolved[os.path.basename(m.group(1))] = m.group(2)
        for lib in needed:
            if lib not in resolved or resolved[lib] == "not":
                fail(f"{elf}: {lib} not found by ldd")
            needed_paths.setdefault(os.path.realpath(resolved[lib]), set()).add(os.path.basename(elf))
    # dpkg may know a library under its usr-merged alias (/lib/... for /usr/lib/...): ask both.
    alias = {p: (p[4:] if p.startswith("/usr/") else "/usr" + p) for p in needed_paths}
    owners = run(["dpkg", "-S", *sorted(needed_paths), *sorted(alias.values())], check=False).stdout
    by_path = {}
    for line in owners.splitlines():
        pkgs, path = line.split(": ", 1)
        by_path.setdefault(path, set()).update(p.strip().split(":")[0] for p in pkgs.split(","))
    missing = []
    for path, users in sorted(needed_paths.items()):
        pkgs = by_path.get(path, set()) | by_path.get(alias[path], set())
        if not pkgs:
            fail(f"{path} (linked by {', '.join(sorted(users))}) belongs to no package")
        # A package may be named by a name it provides (libspdlog1.10 provides libspdlog1.10-fmt9).
        names = set(pkgs)
        for pkg in pkgs:
            provides = run(["dpkg-query", "-W", "-f=${Provides}", pkg]).stdout
            names.update(x.strip().split(" ")[0] for x in provides.split(",") if x.strip())
        if not names & depends:
            missing.append(f"{path} ({', '.join(sorted(pkgs))}; linked by {', '.join(sorted(users))})")
    if missing:
        fail(f"Depends: of {os.path.basename(deb)} ({', '.join(sorted(depends))}) lacks:\n  " + "\n  ".join(missing))
    log(f"Depends covers the {len(needed_paths)} libraries linked: {deb_field(deb, 'Depends')}")


def check_opened_packages(deb, root):
    """Every versioned library an ELF file of the package names but does not link (opened with
    dlopen() on first use: libpq, libcrypto, libsystemd) belongs to a package that Depends: or
    Recommends: names, since shlibdeps cannot see them."""
    declared = depends_names(deb)
    for alternative in deb_field(deb, "Recommends").split(","):
        declared.update(c.strip().split(" ")[0] for c in alternative.split("|") if c.strip())
    cache = {}
    for line in run(["ldconfig", "-p"]).stdout.splitlines():
        m = re.match(r"\s*(\S+) \(([^)]*)\) => (\S+)", line)
        if m and "x86-64" in m.group(2):
            cache.setdefault(m.group(1), m.group(3))
    opened = {}
    for elf in elf_files(root):
        needed = set(re.findall(r"\(NEEDED\)\s+Shared library: \[([^\]]+)\]", run(["readelf", "-d", elf]).stdout))
        with open(elf, "rb") as fh:
            named = {m.decode() for m in re.findall(rb"\blib[A-Za-z0-9_+-]+\.so\.[0-9]+\b", fh.read())}
        # A name that a linked library's begins with is that library (libgrpc++.so.1 in
        # gRPC's strings is the linked libgrpc++.so.1.51).
        for lib in named:
            if not any(n == lib or n.startswith(lib + ".") for n in needed):
                opened.setdefault(lib, set()).add(os.path.basename(elf))
    if not opened:
        fail("no library opened at run time found: the check would pass on anything")
    missing = []
    for lib, users in sorted(opened.items()):
        path = cache.get(lib)
        if path is None:
            fail(f"{lib} (opened by {', '.join(sorted(users))}) is not installed here; the test cannot tell its package")
        owners = run(["dpkg", "-S", os.path.realpath(path)], check=False).stdout
        pkgs = {p.strip().split(":")[0] for line in owners.splitlines() for p in line.split(": ", 1)[0].split(",")}
        if not pkgs & declared:
            missing.append(f"{lib} ({', '.join(sorted(pkgs)) or 'no package'}; opened by {', '.join(sorted(users))})")
    if missing:
        fail(f"Depends:/Recommends: of {os.path.basename(deb)} lack:\n  " + "\n  ".join(missing))
    log(f"Depends/Recommends cover the {len(opened)} libraries opened at run time: {', '.join(sorted(opened))}")


def check_contents(args):
    debs = find_debs(args.debs)
    version = project_version(args.config)
    work = tempfile.mkdtemp(prefix="flurry-deb-")
    try:
        for pkg, deb in debs.items():
            if deb_field(deb, "Package") != pkg:
                fail(f"{deb}: Package: {deb_field(deb, 'Package')}")
            if deb_field(deb, "Version") != f"{version}-1":
                fail(f"{deb}: Version: {deb_field(deb, 'Version')}, not {version}-1")
            listing = run(["dpkg-deb", "-c", deb]).stdout.splitlines()
            entries = {}
            for line in listing:
                mode, owner, _size, _date, _time, path = line.split(None, 5)
                path = path.split(" -> ")[0]
                entries[path] = (mode, owner)
                if owner != "root/root":
                    fail(f"{pkg}: {path} is owned by {owner}, not root/root")
                if mode[0] == "-" and mode not in ("-rw-r--r--", "-rwxr-xr-x"):
                    fail(f"{pkg}: {path} has mode {mode} (0644 or 0755 expected)")
            for doc in ("copyright", "changelog.Debian.gz"):
                if f"./usr/share/doc/{pkg}/{doc}" not in entries:
                    fail(f"{pkg}: no /usr/share/doc/{pkg}/{doc}")
            control = os.path.join(work, pkg + ".control")
            run(["dpkg-deb", "-e", deb, control])
            if pkg == "flurry":
                expected = {
                    "./usr/bin/flurry": "-rwxr-xr-x",
                    "./usr/lib/flurry/flurry_grpc.so": "-rw-r--r--",
                    "./usr/lib/flurry/flurry_tls.so": "-rw-r--r--",
                    "./usr/lib/flurry/flurry_etcd.so": "-rw-r--r--",
                    "./etc/flurry/flurry.toml": "-rw-r--r--",
                    "./lib/systemd/system/flurry.service": "-rw-r--r--",
                    "./lib/systemd/system/flurry@.service": "-rw-r--r--",
                }
                for path, mode in expected.items():
                    if entries.get(path, (None,))[0] != mode:
                        fail(f"flurry: {path}: {entries.get(path, ('missing',))[0]}, expected {mode}")
                conffiles_path = os.path.join(control, "conffiles")
                conffiles = open(conffiles_path).read().split() if os.path.exists(conffiles_path) else []
                if conffiles != ["/etc/flurry/flurry.toml"]:
                    fail(f"flurry: conffiles {conffiles}, expected /etc/flurry/flurry.toml only")
                for script in ("postinst", "prerm", "postrm"):
                    path = os.path.join(control, script)
                    if not os.path.exists(path) or (os.stat(path).st_mode & 0o777) != 0o755:
                        fail(f"flurry: maintainer script {script} missing or not 0755")
                    with open(path) as f:
                        text = f.read()
                    if not text.startswith("#!/bin/sh\n") or "deb-systemd" not in text:
                        fail(f"flurry: {script} is not dh_installsystemd's sh script")
                    run(["sh", "-n", path])
                root = unpack(deb, os.path.join(work, "root"))
                for elf in elf_files(root):
                    if "not stripped" in run(["file", "-b", elf]).stdout:
                        fail(f"flurry: {elf} is not stripped")
                check_linked_packages(deb, root)
                check_opened_packages(deb, root)
            if pkg == "libflurry-dev":
                # Debian's multiarch library directory (lib/x86_64-linux-gnu), as lintian expects.
                libdir = "./usr/lib/" + run(["gcc", "-print-multiarch"]).stdout.strip()
                for path in ("./usr/include/flurry/generator.h", f"{libdir}/libflurry_core.a",
                             f"{libdir}/libflurry_order.a", f"{libdir}/cmake/flurry/flurryConfig.cmake",
                             f"{libdir}/cmake/flurry/flurryConfigVersion.cmake",
                             f"{libdir}/pkgconfig/flurry.pc", f"{libdir}/pkgconfig/flurry-order.pc",
                             f"{libdir}/pkgconfig/flurry-client.pc", f"{libdir}/libflurry_client.a"):
                    if entries.get(path, (None,))[0] != "-rw-r--r--":
                        fail(f"libflurry-dev: {path}: {entries.get(path, ('missing',))[0]}")
                # The pkg-config files are written at install time: their prefix must be the
                # package's, not CPack's staging directory.
                dev_root = unpack(deb, os.path.join(work, "dev-root"))
                for pc in ("flurry.pc", "flurry-order.pc", "flurry-client.pc"):
                    with open(os.path.join(dev_root, libdir, "pkgconfig", pc)) as f:
                        text = f.read()
                    if not re.search(r"^prefix=/usr$", text, re.M) or "_CPack_Packages" in text:
                        fail(f"libflurry-dev: {pc} has a wrong prefix:\n{text}")
            log(f"{pkg}: {len(entries)} entries, {os.path.getsize(deb)} bytes, Depends: {deb_field(deb, 'Depends')}")
    finally:
        shutil.rmtree(work, ignore_errors=True)


def systemd_root(deb, work):
    """The unpacked package, with what its units need of the system and no package of ours
    provides: systemd's own targets, /bin/kill (procps, a Depends:) and /usr/bin/install (coreutils,
    Essential: the units' ExecStartPre= makes the host directory) copied from this host.
    systemd-analyze --root= then checks the units' commands in the package."""
    root = unpack(deb, os.path.join(work, "root"))
    targets = os.path.join(root, "usr/lib/systemd/system")
    os.makedirs(targets, exist_ok=True)
    for f in os.listdir("/lib/systemd/system"):
        if f.endswith(".target"):
            shutil.copy(os.path.join("/lib/systemd/system", f), targets)
    os.makedirs(os.path.join(root, "bin"), exist_ok=True)
    shutil.copy("/bin/kill", os.path.join(root, "bin/kill"))
    os.makedirs(os.path.join(root, "usr/bin"), exist_ok=True)
    shutil.copy("/usr/bin/install", os.path.join(root, "usr/bin/install"))
    return root


def verify(root, unit):
    """systemd-analyze verify's complaints about a unit of the root (empty: none). Unknown keys and
    bad values are only logged by systemd (exit 0): any output counts."""
    p = run(["systemd-analyze", "verify", "--man=no", "--generators=no", f"--root={root}",
             os.path.join(root, "lib/systemd/system", unit)], check=False)
    out = (p.stdout + p.stderr).strip()
    if p.returncode != 0 and not out:
        out = f"exit {p.returncode}"
    return out


def exposure(root, unit):
    p = run(["systemd-analyze", "security", "--offline=true", f"--root={root}",
             os.path.join(root, "lib/systemd/system", unit)], check=False)
    m = re.search(rf"Overall exposure level for {re.escape(unit)}: (\d+\.\d+)", p.stdout)
    if not m:
        fail(f"systemd-analyze security {unit}: no exposure level in\n{p.stdout}{p.stderr}")
    return float(m.group(1))


def check_systemd(args):
    deb = find_debs(args.debs)["flurry"]
    work = tempfile.mkdtemp(prefix="flurry-deb-")
    try:
        root = systemd_root(deb, work)
        units = os.path.join(root, "lib/systemd/system")
        # The check itself: a typo in a key and an ExecStart that the package lacks are caught.
        with open(os.path.join(units, "flurry.service")) as f:
            good = f.read()
        for broken in (good.replace("ProtectSystem=", "ProtectSytem="),
                       good.replace("ExecStart=/usr/bin/flurry ", "ExecStart=/usr/bin/flury ")):
            if broken == good:
                fail("flurry.service lost the line the self-check breaks")
            with open(os.path.join(units, "broken.service"), "w") as f:
                f.write(broken)
            if not verify(root, "broken.service"):
                fail("systemd-analyze verify passed a broken unit: this check would miss typos")
        os.remove(os.path.join(units, "broken.service"))

        for unit in ("flurry.service", "flurry@.service", "flurry@a.service"):
            problems = verify(root, unit)
            if problems:
                fail(f"systemd-analyze verify {unit}:\n{problems}")
        log("systemd-analyze verify: flurry.service, flurry@.service, flurry@a.service clean")

        for unit in ("flurry.service", "flurry@a.service"):
            level = exposure(root, unit)
            log(f"systemd-analyze security --offline=true {unit}: exposure {level}")
            if level > MAX_EXPOSURE:
                fail(f"{unit}: exposure {level} > {MAX_EXPOSURE}")

        # The packaged configuration keeps its state where the units' StateDirectory= is.
        with open(os.path.join(root, "etc/flurry/flurry.toml")) as f:
            data_dir = re.search(r'^data_dir = "([^"]+)"', f.read(), re.M)
        for unit in UNITS:
            with open(os.path.join(units, unit)) as f:
                state = re.search(r"^StateDirectory=(\S+)$", f.read(), re.M)
            if not data_dir or not state or data_dir.group(1) != "/var/lib/" + state.group(1):
                fail(f"{unit}: StateDirectory= and data_dir in /etc/flurry/flurry.toml differ")
    finally:
        shutil.rmtree(work, ignore_errors=True)


def check_serve(args):
    deb = find_debs(args.debs)["flurry"]
    version = project_version(args.config)
    root = unpack(deb, tempfile.mkdtemp(prefix="flurry-deb-root-"))
    flurry = os.path.join(root, "usr/bin/flurry")
    config = os.path.join(root, "etc/flurry/flurry.toml")
    sys.path.insert(0, args.harness)
    sys.argv = [sys.argv[0], flurry]
    import harness as h  # tests/integration/harness.py: servers by PID, free ports, cleanup

    h.init()  # also unsets every FLURRY_* variable (FLURRY_MODULE_DIR among them)
    import atexit

    atexit.register(shutil.rmtree, root, True)

    def body():
        out = run([flurry, "--version"]).stdout
        h.check(out.strip() == f"flurry {version}", f"--version: {out!r}")
        printed = run([flurry, "serve", "--print-config", "--config", config]).stdout
        for line in ("data_dir = '/var/lib/flurry'", "registry = 'sqlite'"):
            h.check(line in printed.splitlines(), f"--print-config lacks {line!r}:\n{printed}")
        # flurry.service's own ExecStart=, its paths in the unpacked tree and the admin token in a
        # credentials directory as systemd makes it (0700, the file 0400), with the flags a test
        # needs on top: a state directory and free ports (harness: --listen, --data-dir;
        # FLURRY_GRPC_LISTEN=127.0.0.1:0).
        with open(os.path.join(root, "lib/systemd/system/flurry.service")) as f:
            exec_start = re.search(r"^ExecStart=((?:.*\\\n)*.*)$", f.read(), re.M)
        h.check(exec_start is not None, "flurry.service has no ExecStart=")
        argv = exec_start.group(1).replace("\\\n", " ").split()
        h.check(argv[:2] == ["/usr/bin/flurry", "serve"], f"ExecStart={' '.join(argv)}")
        credentials = os.path.join(h.WORK, "credentials")
        os.mkdir(credentials, 0o700)
        with open(os.open(os.path.join(credentials, "admin-token"), os.O_WRONLY | os.O_CREAT, 0o400),
                  "w") as f:
            f.write(os.urandom(32).hex() + "\n")
        serve_args = []
        for arg in argv[2:]:
            arg = arg.replace("${CREDENTIALS_DIRECTORY}", credentials)
            serve_args.append(root + arg if arg.startswith("/etc/flurry/") else arg)
        h.check(config in serve_args, f"ExecStart= does not use /etc/flurry/flurry.toml: {argv}")
        env = dict(os.environ, CREDENTIALS_DIRECTORY=credentials)
        h.check("FLURRY_MODULE_DIR" not in env, "FLURRY_MODULE_DIR is set")
        srv = h.Server("packaged", os.path.join(h.WORK, "state"), binary=flurry, args=serve_args,
                       env=env).start()
        ids = h.get_ids(srv.port, 5)
        h.check(len(ids) == 5 and len(set(ids)) == 5, f"/v1/ids: {ids}")
        with open(f"/proc/{srv.pid}/maps") as f:
            maps = {line.split()[-1] for line in f if "/" in line}
        module = os.path.realpath(os.path.join(root, "usr/lib/flurry/flurry_grpc.so"))
        h.check(module in maps, f"the gRPC module was not loaded from {module}: "
                f"{sorted(m for m in maps if 'flurry' in m)}")
        rc, elapsed = srv.stop(signal.SIGTERM)
        h.check(rc == 0, f"exit {rc} after SIGTERM")
        h.check("event=stopped" in srv.log_text(), "no event=stopped after SIGTERM")
        log(f"served 5 IDs from the unpacked package with its config; stopped in {elapsed:.2f} s")

    h.run_main(body)


# The maintainer scripts as dpkg runs them, on the unpacked package as DPKG_ROOT (dpkg's --root,
# which the scripts and deb-systemd-helper honour): every file they write lands there. $1: the
# control directory, $2: the root.
SCRIPTS_SH = r"""
set -eu
ctl=$1
export DPKG_ROOT=$2 DPKG_MAINTSCRIPT_PACKAGE=flurry DPKG_MAINTSCRIPT_ARCH=amd64
run() { DPKG_MAINTSCRIPT_NAME=$1 "$ctl/$@"; }
say() { echo "== $*"; }
wants=$DPKG_ROOT/etc/systemd/system/multi-user.target.wants/flurry.service

say fresh install: postinst configure
run postinst configure
stat -c '%a %U:%G %s' "$DPKG_ROOT/etc/flurry/admin-token"
token=$(cat "$DPKG_ROOT/etc/flurry/admin-token")
echo "$token" | grep -qx '[0-9a-f]\{64\}' && echo "token: 64 hex digits"
readlink "$wants"

say upgrade: prerm upgrade, postinst configure 0.1.0-1
run prerm upgrade 0.1.0-1
run postinst configure 0.1.0-1
[ "$(cat "$DPKG_ROOT/etc/flurry/admin-token")" = "$token" ] && echo "token kept"

say remove: prerm remove, postrm remove
mkdir -p "$DPKG_ROOT/var/lib/private/flurry"
echo state > "$DPKG_ROOT/var/lib/private/flurry/registry.db"
run prerm remove
run postrm remove
[ -e "$DPKG_ROOT/etc/flurry/admin-token" ] && echo "token kept after remove"

say purge: postrm purge
rm "$DPKG_ROOT/etc/flurry/flurry.toml"  # dpkg removes the conffiles before postrm purge
run postrm purge
[ -e "$DPKG_ROOT/etc/flurry/admin-token" ] || echo "token removed"
[ -e "$DPKG_ROOT/etc/flurry" ] || echo "/etc/flurry removed"
[ -e "$wants" ] || [ -L "$wants" ] || echo "unit disabled"
cat "$DPKG_ROOT/var/lib/private/flurry/registry.db"
"""


def check_scripts(args):
    """postinst, prerm and postrm through a fresh install, an upgrade, a removal and a purge,
    with the real deb-systemd-helper, on the unpacked package as DPKG_ROOT."""
    deb = find_debs(args.debs)["flurry"]
    work = tempfile.mkdtemp(prefix="flurry-deb-")
    try:
        control = os.path.join(work, "control")
        run(["dpkg-deb", "-e", deb, control])
        # Never let a script write this host's files: each path it names must be under DPKG_ROOT.
        for script in ("postinst", "prerm", "postrm"):
            with open(os.path.join(control, script)) as f:
                for n, line in enumerate(f, 1):
                    code = line.split("#", 1)[0]
                    if re.search(r"(?<![}\w])/(etc|var)/", code):
                        fail(f"{script}:{n} names a path outside ${{DPKG_ROOT}}: {line.strip()}")
        root = unpack(deb, os.path.join(work, "root"))
        p = run(["sh", "-c", SCRIPTS_SH, "sh", control, root], check=False)
        out = p.stdout
        log(out.rstrip())
        if p.returncode != 0:
            fail(f"maintainer scripts: exit {p.returncode}\n{p.stderr}")
        lines = out.splitlines()
        for line in ("600 root:root 65", "token: 64 hex digits", "/lib/systemd/system/flurry.service",
                     "token kept", "token kept after remove", "token removed", "/etc/flurry removed",
                     "unit disabled",
                     "state"):  # purge keeps /var/lib/private/flurry (the durable horizons)
            if line not in lines:
                fail(f"maintainer scripts: no line {line!r} in their run (stderr: {p.stderr.strip()})")
    finally:
        shutil.rmtree(work, ignore_errors=True)

def syscall_groups():
    """systemd's system call groups: name -> set of system calls, nested groups expanded."""
    groups, current = {}, None
    for line in run(["systemd-analyze", "syscall-filter"]).stdout.splitlines():
        if line.startswith("@"):
            current = groups.setdefault(line.strip(), [])
        elif current is not None and line.strip() and not line.strip().startswith("#"):
            current.append(line.strip())

    def expand(name, seen=()):
        out = set()
        for entry in groups.get(name, []):
            out |= expand(entry, seen + (name,)) if entry.startswith("@") and entry not in seen else {entry}
        return out

    return {name: expand(name) for name in groups}


def unit_syscall_filter(unit_text, groups):
    """The system calls flurry.service's SystemCallFilter= lines allow (with @default, which
    systemd always allows), and those they deny."""
    allowed, denied = set(groups["@default"]), set()
    for value in re.findall(r"^SystemCallFilter=(.*)$", unit_text, re.M):
        deny = value.startswith("~")
        for entry in value.lstrip("~").split():
            calls = groups[entry] if entry.startswith("@") else {entry}
            (denied if deny else allowed).update(calls)
    return allowed - denied, denied


def check_syscalls(args):
    """The unpacked server, as an unprivileged user (DynamicUser= never runs it as root), traced
    with strace through a start with gRPC on, /v1/ids, SIGHUP and SIGTERM: every system call it
    makes is one flurry.service's SystemCallFilter= allows (a filtered call would fail with
    EPERM under systemd)."""
    if os.geteuid() != 0:
        fail("needs root (to run the server as another user), as make test runs")
    deb = find_debs(args.debs)["flurry"]
    work = tempfile.mkdtemp(prefix="flurry-deb-")
    proc = None
    try:
        os.chmod(work, 0o755)
        root = unpack(deb, os.path.join(work, "root"))
        with open(os.path.join(root, "lib/systemd/system/flurry.service")) as f:
            allowed, denied = unit_syscall_filter(f.read(), syscall_groups())
        state = os.path.join(work, "state")
        os.mkdir(state, 0o700)
        token = os.path.join(work, "admin-token")
        with open(os.open(token, os.O_WRONLY | os.O_CREAT, 0o600), "w") as f:
            f.write(os.urandom(32).hex() + "\n")
        for path in (state, token):
            os.chown(path, 65534, 65534)
        sys.path.insert(0, args.harness)
        import harness as h  # free_port and request only

        port = h.free_port()
        trace = os.path.join(work, "trace")
        env = {k: v for k, v in os.environ.items() if not k.startswith("FLURRY_")}
        env["FLURRY_GRPC_LISTEN"] = "127.0.0.1:0"
        proc = subprocess.Popen(
            ["strace", "-f", "-qq", "-o", trace, "setpriv", "--reuid=65534", "--regid=65534",
             "--clear-groups", "--", os.path.join(root, "usr/bin/flurry"), "serve", "--config",
             os.path.join(root, "etc/flurry/flurry.toml"), "--data-dir", os.path.join(state, "d"),
             "--listen", f"127.0.0.1:{port}", f"--admin-token-file={token}"],
            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env,
            cwd=work)
        deadline = time.monotonic() + 30
        while True:
            try:
                if h.request(port, "/readyz", timeout=2).status == 200:
                    break
            except OSError:
                pass
            if proc.poll() is not None or time.monotonic() > deadline:
                fail(f"the traced server did not get ready:\n{proc.stdout.read().decode()[-2000:]}")
            time.sleep(0.05)
        r = h.request(port, "/v1/ids?count=3")
        if r.status != 200:
            fail(f"/v1/ids: {r.status}")
        with open(f"/proc/{proc.pid}/task/{proc.pid}/children") as f:
            server = int(f.read().split()[0])  # setpriv, then the server (exec keeps the PID)
        os.kill(server, signal.SIGHUP)
        time.sleep(0.2)
        os.kill(server, signal.SIGTERM)
        out = proc.communicate(timeout=30)[0].decode()
        if "event=stopped" not in out:
            fail(f"no clean stop:\n{out[-2000:]}")
        used, started = {}, False
        with open(trace) as f:
            for line in f:
                m = re.match(r"(\d+)\s+([a-z0-9_]+)\(", line)
                if not m:
                    continue
                if m.group(2) == "execve" and "/usr/bin/flurry" in line and line.rstrip().endswith("= 0"):
                    started = True  # setpriv's own calls come before
                    continue
                if started:
                    used[m.group(2)] = used.get(m.group(2), 0) + 1
        if not used:
            fail("no system call of the server in the trace")
        outside = sorted(c for c in used if c not in allowed)
        log(f"{len(used)} distinct system calls; allowed {len(allowed)}, denied {len(denied & set(used))}")
        if outside:
            fail("system calls flurry.service's SystemCallFilter= refuses: "
                 + ", ".join(f"{c} ({used[c]}x{', denied' if c in denied else ''})" for c in outside))
    finally:
        if proc is not None and proc.poll() is None:
            proc.kill()
            proc.wait()
        shutil.rmtree(work, ignore_errors=True)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("check", choices=["cpack", "lintian", "contents", "systemd", "scripts", "syscalls", "serve"])
    parser.add_argument("--debs", required=True)
    parser.add_argument("--cpack", required=True)
    parser.add_argument("--config", required=True)
    parser.add_argument("--harness", required=True)
    args = parser.parse_args()
    t0 = time.monotonic()
    globals()["check_" + args.check](args)
    log(f"ok ({time.monotonic() - t0:.1f} s)")


if __name__ == "__main__":
    main()
