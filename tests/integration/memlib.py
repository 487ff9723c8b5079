"""Memory measurements of a running server for the resource tests (standard library only).

rss_mib(pid): the resident set of a process now, from /proc. sanitized(binary): whether the
binary is a sanitizer build (its allocator keeps freed memory in a quarantine and shadow memory
grows with what was touched, so absolute figures differ; growth bounds still apply).
lean_env(): the environment for a server whose RSS is measured: under ASan a small quarantine,
so that freed memory is reused soon instead of held (no effect on other builds).
"""
import os


def rss_mib(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024.0
    raise RuntimeError(f"no VmRSS for process {pid}")


def sanitized(binary):
    with open(binary, "rb") as f:
        data = f.read()
    return b"__asan_init" in data or b"__tsan_init" in data


def lean_env():
    env = dict(os.environ)
    extra = "quarantine_size_mb=16:thread_local_quarantine_size_kb=256"
    env["ASAN_OPTIONS"] = (env["ASAN_OPTIONS"] + ":" if env.get("ASAN_OPTIONS") else "") + extra
    return env
