"""Memory measurements of a running server for the resource tests (standard library only).

rss_mib(pid): the resident set of a process now, from /proc. lean_env(): the environment for a
server whose RSS is measured: under ASan (the debug preset) a small quarantine, so that freed
memory is reused soon instead of held up to ASan's default 256 MiB; no effect on other builds.
The tests bound the growth over a baseline taken in the same run, which holds in both builds.
"""
import os


def rss_mib(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024.0
    raise RuntimeError(f"no VmRSS for process {pid}")


def lean_env():
    env = dict(os.environ)
    extra = "quarantine_size_mb=16:thread_local_quarantine_size_kb=256"
    env["ASAN_OPTIONS"] = (env["ASAN_OPTIONS"] + ":" if env.get("ASAN_OPTIONS") else "") + extra
    return env
