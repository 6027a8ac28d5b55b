#!/usr/bin/env python3
"""Turn `go tool pprof -top` and `-top -cum` output into a few lines on where the time goes.

Usage: pprof_notes.py TOP CUM_ALL. Works for the gateway process profile and for
the store benchmark profile: areas whose functions are not in the profile are left out.
"""
import re, sys

def rows(path):
    out = {}
    for line in open(path):
        m = re.match(r'\s*([\d.]+\w*)\s+([\d.]+)%\s+[\d.]+%\s+([\d.]+\w*)\s+([\d.]+)%\s+(.*)$', line)
        if m:
            out[m.group(5).strip()] = (float(m.group(2)), float(m.group(4)))
    return out

top, cum = rows(sys.argv[1]), rows(sys.argv[2])
allr = {**cum, **top}

def find(*subs, i=1):
    """The largest flat (i=0) or cumulative (i=1) share among functions containing any of subs."""
    vals = [v[i] for k, v in allr.items() if any(s in k for s in subs)]
    return max(vals) if vals else None

areas = [
    ("HTTP server, all of it (net/http conn.serve)", find('net/http.(*conn).serve')),
    ("gin and our middleware chain (Engine.ServeHTTP)", find('gin.(*Engine).ServeHTTP')),
    ("the position handler", find('httpapi.(*handler).position')),
    ("the Redis round trip (Store.Position: EVALSHA write, flush, read)", find('redisstore.(*Store).Position')),
    ("JWT verification (golang-jwt parse and validate)", find('jwt/v5.(*Parser).ParseWithClaims', 'jwt/v5.(*Parser).Parse')),
    ("JSON response encoding", find('gin.(*Context).JSON', 'gin.(*Context).Render', 'encoding/json.Marshal')),
    ("Prometheus request metrics", find('prometheus.(*histogram).Observe', 'prometheus.(*counter).Inc')),
    ("allocation (runtime.mallocgc)", find('runtime.mallocgc')),
    ("garbage collection (gcBgMarkWorker)", find('runtime.gcBgMarkWorker')),
    ("scheduler (runtime.schedule)", find('runtime.schedule')),
]
print("| area | cumulative share of CPU samples |")
print("|---|---|")
for name, v in areas:
    if v is not None:
        print(f"| {name} | {v:.1f} % |")
print()
sysc = find('linux.Syscall6', i=0) or 0.0
ours = sum(v[0] for k, v in top.items() if 'waitingroom' in k)
flat = sorted(top.items(), key=lambda kv: -kv[1][0])[:5]
print(f"- {sysc:.0f} % of all samples are flat in the read/write syscalls (Syscall6): every request is one socket "
      "read and write with the client and one EVALSHA round trip to Redis, so the process is bound by I/O "
      "system calls, not by our code.")
print("- Top flat functions: " + ", ".join(f"{k.split('/')[-1]} {v[0]:.1f} %" for k, v in flat) +
      f". Our own packages' flat share among the top 15 is {ours:.1f} %.")
print("- On the server side Redis runs the Lua script (ZCARD + ZRANK + HMGET + measured-rate read); the redis-benchmark "
      "row in section 1 is that ceiling.")
