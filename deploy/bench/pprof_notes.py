#!/usr/bin/env python3
"""Turn `go tool pprof -top` and `-top -cum` output into a few lines on where the time goes."""
import re, sys

def rows(path):
    out = {}
    for line in open(path):
        m = re.match(r'\s*([\d.]+\w*)\s+([\d.]+)%\s+[\d.]+%\s+([\d.]+\w*)\s+([\d.]+)%\s+(.*)$', line)
        if m:
            out[m.group(5).strip()] = (float(m.group(2)), float(m.group(4)))
    return out

top, cum = rows(sys.argv[1]), rows(sys.argv[2])
allr = {**top, **cum}
def find(sub, i=1):
    for k, v in allr.items():
        if sub in k:
            return v[i]
    return 0.0
sysc = find('linux.Syscall6', 0)
pos = find('redisstore.(*Store).Position')
enter = find('redisstore.(*Store).Enter')
push = find('processPendingNotifications')
epoll = find('EpollWait')
flat = sorted(top.items(), key=lambda kv: -kv[1][0])[:5]
print(f"- {sysc:.0f} % of all samples are flat in the read/write syscalls (Syscall6): one EVALSHA is one "
      f"round trip, so the Go side of the position path is dominated by socket I/O, not by our code" +
      (f"; epoll/netpoll adds {epoll:.0f} %." if epoll else "."))
setup = f" ({enter:.0f} % is the benchmark's setup, 10,000 Store.Enter calls)" if enter else ""
print(f"- Store.Position is {pos:.0f} % cumulative{setup}; inside it go-redis's script path "
      f"(Script.Run -> EvalSha -> process -> withConn: write, flush, read the reply) is nearly all of it.")
if push:
    print(f"- go-redis reads every reply through its RESP3 push-notification processor "
          f"(push.(*Processor).processPendingNotifications, {push:.0f} % cumulative, which includes peeking/reading the reply "
          f"from the socket); worth a look with RESP2 if the client side ever matters.")
ours = max([v[0] for k, v in top.items() if 'waitingroom' in k] or [0.0])
print("- Top flat functions: " + ", ".join(f"{k.split('/')[-1]} {v[0]:.1f} %" for k, v in flat) +
      f". The largest flat share of our own code (pkg/redisstore reply parsing) is {ours:.1f} %.")
print("- On the server side Redis runs the Lua script (ZCARD + ZRANK + HMGET + measured-rate read); the redis-benchmark "
      "row in section 1 is that ceiling.")
