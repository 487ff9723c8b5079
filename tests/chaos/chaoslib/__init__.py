"""The chaos harness of flurry (Python 3 standard library only); see tests/chaos/README.md.

procs      child processes: started with PR_SET_PDEATHSIG, stopped by PID, cleaned up at exit
etcd       a 3-member etcd cluster on loopback (start, stop, kill, restart members, find the leader)
postgres   one PostgreSQL 15 server run as the postgres user (initdb, start, kill -9, stop)
registries one small class per flurry registry: its servers, the flurry flags, its faults
nodes      `flurry serve` processes (optionally under libfaketime) and their fault windows
load       keep-alive HTTP load clients that keep every ID, refusal and transport error
layout     the ID layout (from GET /v1/layout) and decoding in Python
checker    the invariants over everything collected (pure functions, self-tested)
scenarios  the faults, one function each, run one after another on the same cluster
"""
