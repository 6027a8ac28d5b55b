#!/usr/bin/env bash
# `make bench`: measure the waiting room on this machine and write
# docs/BENCHMARKS.md. Needs: go, wrk, redis-server, redis-cli,
# redis-benchmark, psql/pgbench against the local PostgreSQL, the local
# RabbitMQ (dispatcher relay, SSE benchmark). Tools that are missing are
# named in BENCHMARKS.md and their part is skipped.
# BENCH_QUICK=1 shortens every run (5 s wrk, 10 s dispatcher windows);
# BENCH_ONLY=gateway stops after the gateway's wrk runs (section 1),
# BENCH_ONLY=million runs only the line of a million (3b), BENCH_ONLY=leader
# only one leader at 50,000/s (4b: LEADER_RATE a second, default 50000;
# LEADER_WINDOW seconds, default 30, 10 with BENCH_QUICK=1; LEADER_TICK the
# dispatcher's DISPATCH_TICK, default 50ms; LEADER_STREAMS
# SSE streams, default 2000); each prints its
# figures without writing BENCHMARKS.md.
# Everything runs against a private redis-server on a free port; processes
# started here are stopped by PID on exit.
set -uo pipefail
cd "$(dirname "$0")/../.."
ROOT=$PWD
QUICK=${BENCH_QUICK:-0}
WRK_D=${WRK_DURATION:-10s}; WRK_C=${WRK_CONNS:-64}; WRK_T=2
DISP_WIN=${DISP_WINDOW:-10}   # seconds per dispatcher accuracy window (brief: 30 s; 10 s keeps make bench short)
RAMP_WIN=5

if [[ $QUICK == 1 ]]; then WRK_D=5s; DISP_WIN=5; RAMP_WIN=3; fi
OUT=${BENCH_OUT:-$ROOT/docs/BENCHMARKS.md}
W=$(mktemp -d /tmp/wr-bench.XXXXXX)
R=$W/results.md; : >"$R"
PGURL_BASE=${PG_URL_BASE:-postgres://postgres@127.0.0.1:5432}
export AMQP_URL=${AMQP_URL:-amqp://guest:guest@127.0.0.1:5672/}
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill -TERM "$p" 2>/dev/null; done
  sleep 0.5
  for p in "${pids[@]}"; do kill -KILL "$p" 2>/dev/null; done
}
trap cleanup EXIT
say() { echo "bench: $*" >&2; }
md() { printf '%s\n' "$*" >>"$R"; }
have() { command -v "$1" >/dev/null 2>&1; }
freeport() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
now() { date +%s.%N; }
calc() { python3 -c "print($*)"; }
missing=()

# ---------------------------------------------------------------- build
say "building services, loadgen, bare server into $W"
mkdir -p "$W/bin"
for s in queue-gateway admission-dispatcher notification-service; do
  CGO_ENABLED=0 go build -trimpath -o "$W/bin/$s" "./services/$s" || exit 1
done
go build -o "$W/bin/loadgen" ./deploy/loadgen/cmd/loadgen || exit 1
go build -o "$W/bin/admitwatch" ./deploy/loadgen/cmd/admitwatch || exit 1
(cd deploy/bench/bare && GOWORK=off go build -o "$W/bin/bare" .) || exit 1

# ---------------------------------------------------------------- private redis
RP=$(freeport)
redis-server --port "$RP" --bind 127.0.0.1 --save '' --appendonly no --daemonize no >"$W/redis.log" 2>&1 &
pids+=($!)
RC="redis-cli -p $RP"
for _ in $(seq 50); do $RC ping >/dev/null 2>&1 && break; sleep 0.1; done
export REDIS_URL="redis://127.0.0.1:$RP/0"
say "private redis on $RP"

# gateway on a free port, dev auth, no per-IP limit
GP=$(freeport); GW=http://127.0.0.1:$GP; OPS=127.0.0.1:$(freeport)
AUTH_DEV_MODE=true ENTER_RATE_LIMIT_PER_IP=0 POSITION_RATE_LIMIT_PER_USER=0 PUBLIC_RATE_LIMIT_PER_IP=0 LOG_LEVEL=error HTTP_ADDR=127.0.0.1:$GP OPS_ADDR=$OPS PPROF_ENABLED=true "$W/bin/queue-gateway" >"$W/gateway.log" 2>&1 &
GWPID=$!; pids+=($GWPID)
for _ in $(seq 100); do curl -fsS "$GW/readyz" >/dev/null 2>&1 && break; sleep 0.1; done
ADMIN=$(curl -fsS -X POST "$GW/api/v1/dev/token" -H 'Content-Type: application/json' -d '{"userId":"bench-admin","role":"admin"}' | jq -r .token)
putq() { # queue json
  curl -fsS -X PUT "$GW/admin/v1/queues/$1" -H "Authorization: Bearer $ADMIN" -H 'Content-Type: application/json' -d "$2" >/dev/null
}

wrkrun() { # name method url tokens
  TOKENS=$3 METHOD=$2 WRK_THREADS=$WRK_T wrk -t$WRK_T -c$WRK_C -d$WRK_D --latency -s deploy/bench/tokens.lua "$4" >"$W/wrk-$1.txt" 2>&1
  rps=$(awk '/Requests\/sec/ {print $2}' "$W/wrk-$1.txt")
  p50=$(awk '$1=="50%" {print $2}' "$W/wrk-$1.txt")
  p99=$(awk '$1=="99%" {print $2}' "$W/wrk-$1.txt")
  non2xx=$(awk '/Non-2xx/ {print $5}' "$W/wrk-$1.txt")
  echo "${rps:-0} ${p50:-?} ${p99:-?} ${non2xx:-0}"
}
# cmdcalls: every command Redis has run (INFO commandstats, scripts' own calls included)
cmdcalls() { $RC INFO commandstats | awk -F'[=,]' '/^cmdstat_/ {s += $2} END {print s}'; }

# ---------------------------------------------------------------- dispatcher helpers (sections 4 and 4b)
fill_line() { # queue n: users d1..d<n> waiting in places 1..n (ZADD in 1,000s, the scores the enter script gives), their enter times (entered, µs, as enter.lua writes them: the tick reads and deletes them), seq = n
  python3 - "$2" "$1" >"$W/fill-$1.resp" <<'PY'
import sys, time
n=int(sys.argv[1]); q=sys.argv[2].encode(); out=sys.stdout.buffer
at=b"%d" % int(time.time() * 1e6)
def cmd(*a):
    out.write(b"*%d\r\n" % len(a))
    for x in a:
        x = x if isinstance(x, bytes) else str(x).encode()
        out.write(b"$%d\r\n%s\r\n" % (len(x), x))
key=b"wr:{%s}:waiting" % q
entered=b"wr:{%s}:entered" % q
for i in range(1, n+1, 1000):
    args=[b"ZADD", key]
    times=[b"HSET", entered]
    for j in range(i, min(i+1000, n+1)):
        args += [j, b"d%d" % j]
        times += [b"d%d" % j, at]
    cmd(*args)
    cmd(*times)
cmd(b"SET", b"wr:{%s}:seq" % q, n)
PY
  $RC --pipe <"$W/fill-$1.resp" >"$W/fill-$1.log" 2>&1
  rm -f "$W/fill-$1.resp"
}
startdisp() { # id ops-port [queue, default $DQ]; TOKEN_EVENTS and the like come from the caller's environment
  INSTANCE_ID=$1 DISPATCH_QUEUES=${3:-$DQ} DISPATCH_TICK=${DTICK:-100ms} LOG_LEVEL=error OPS_ADDR=127.0.0.1:$2 \
    "$W/bin/admission-dispatcher" >>"$W/dispatcher-$1.log" 2>&1 &
  echo $!
}
issued() { $RC HGET "wr:{${1:-$DQ}}:dispatch" issuedTotal | sed 's/^$/0/'; } # [queue]
issued_now() { # queue -> "issuedTotal seconds" (Redis TIME, read in the same script call)
  $RC EVAL "local t = redis.call('TIME') return {redis.call('HGET', KEYS[1], 'issuedTotal') or '0', t[1] .. '.' .. string.format('%06d', t[2])}" \
    1 "wr:{$1}:dispatch" | paste -sd ' '
}

# ---------------------------------------------------------------- 4b. one leader at 50,000/s (run at the start of section 4, or alone with BENCH_ONLY=leader)
# Its own queue of LEAD_RATE x (window + 5) people (d1..dN, as section 4),
# tokenTtlSeconds 600; a notification-service; admitwatch (deploy/loadgen/
# cmd/admitwatch), which binds its own queue to token.issued and
# tokens.issued and opens LEAD_STREAMS SSE streams for people the window
# admits; one dispatcher with TOKEN_EVENTS=batch; then OPEN at LEAD_RATE,
# 1.5 s settling, issuedTotal over the window. Needs GW, ADMIN (a gateway).
LEAD_RATE=${LEADER_RATE:-50000}; LEAD_WIN=${LEADER_WINDOW:-30}; [[ $QUICK == 1 ]] && LEAD_WIN=10
LEAD_STREAMS=${LEADER_STREAMS:-2000}; LEAD_TICK=${LEADER_TICK:-50ms}
lead_run() {
  LQ=lead-$$
  local nfill=$(( LEAD_RATE * (LEAD_WIN + 5) )) secret=bench-notification-secret-0123456789abcdef
  say "one leader at $LEAD_RATE/s for $LEAD_WIN s (TOKEN_EVENTS=batch): filling $nfill"
  putq $LQ "{\"state\":\"PAUSED\",\"admissionRatePerSec\":$LEAD_RATE,\"maxQueueSize\":50000000,\"maxWaitSeconds\":604800,\"tokenTtlSeconds\":600}"
  fill_line $LQ $nfill
  local np; np=$(freeport); NSURL=http://127.0.0.1:$np
  HTTP_ADDR=127.0.0.1:$np OPS_ADDR=127.0.0.1:$(freeport) AUTH_JWT_SECRET=$secret SSE_MAX_STREAMS_PER_IP=0 \
    SSE_POSITION_INTERVAL=1h SSE_HEARTBEAT=1m LOG_LEVEL=warn "$W/bin/notification-service" >"$W/notification.log" 2>&1 &
  local nspid=$!; pids+=($nspid)
  for _ in $(seq 100); do curl -fsS "$NSURL/readyz" >/dev/null 2>&1 && break; sleep 0.1; done
  # The streams are of people admitted inside the window at LEAD_RATE.
  LEAD_AWCMD="admitwatch -queue <q> -notify <notification-service> -secret <its AUTH_JWT_SECRET> -streams $LEAD_STREAMS -from $(( LEAD_RATE * 2 )) -to $(( LEAD_RATE * (LEAD_WIN + 1) )) -window ${LEAD_WIN}s -settle 1.5s -grace 5s"
  "$W/bin/admitwatch" -queue $LQ -notify "$NSURL" -secret $secret -streams "$LEAD_STREAMS" -from $(( LEAD_RATE * 2 )) \
    -to $(( LEAD_RATE * (LEAD_WIN + 1) )) -window "${LEAD_WIN}s" -settle 1.5s -grace 5s >"$W/admitwatch.out" 2>"$W/admitwatch.log" &
  local awpid=$!; pids+=($awpid)
  for _ in $(seq 1200); do grep -q 'ready:' "$W/admitwatch.log" 2>/dev/null && break; kill -0 $awpid 2>/dev/null || break; sleep 0.1; done
  say "$(tail -1 "$W/admitwatch.log")"
  local l1; l1=$(TOKEN_EVENTS=batch DTICK=$LEAD_TICK startdisp lead "$(freeport)" $LQ); pids+=($l1)
  sleep 1.5
  putq $LQ "{\"state\":\"OPEN\",\"admissionRatePerSec\":$LEAD_RATE}"
  sleep 1.5
  # issuedTotal and Redis's clock in one script call at each end of the
  # window: the window is exact whatever forking redis-cli costs.
  local a ta b tb
  lead_keys0=$($RC DBSIZE)
  read -r a ta < <(issued_now $LQ); sleep "$LEAD_WIN"; read -r b tb < <(issued_now $LQ)
  lead_keys1=$($RC DBSIZE)
  read -r lead_issued lead_expected lead_err lead_secs < <(calc "f'{$b-$a} {$LEAD_RATE*($tb-$ta):.0f} {abs(($b-$a)-$LEAD_RATE*($tb-$ta))/($LEAD_RATE*($tb-$ta))*100:.2f} {$tb-$ta:.2f}'")
  say "one leader: $lead_issued issued of $lead_expected in $lead_secs s (rate error $lead_err %); Redis keys $lead_keys0 -> $lead_keys1; waiting for admitwatch"
  for _ in $(seq 300); do grep -q '^admitwatch: queue=' "$W/admitwatch.out" && break; kill -0 $awpid 2>/dev/null || break; sleep 0.1; done
  kill -TERM $awpid 2>/dev/null; wait $awpid 2>/dev/null
  lead_line=$(grep -E '^admitwatch: queue=' "$W/admitwatch.out" | tail -1)
  lead_outbox=$($RC XLEN "wr:{$LQ}:outbox")
  lead_key() { grep -oE "(^| )$1=[^ ]*" <<<"$lead_line" | cut -d= -f2; }
  lead_inv=$(lead_key inversions); lead_dup=$(lead_key duplicates); lead_aw_tokens=$(lead_key tokens); lead_aw_rate=$(lead_key rate_per_s)
  lead_msgs=$(lead_key messages); lead_ticks=$(lead_key ticks); lead_amqp_p50=$(lead_key amqp_p50_ms); lead_amqp_p99=$(lead_key amqp_p99_ms)
  lead_fan_adm=$(lead_key fanout_admitted); lead_fan_n=$(lead_key fanout_n)
  lead_fan_p50=$(lead_key fanout_p50_ms); lead_fan_p99=$(lead_key fanout_p99_ms); lead_fan_max=$(lead_key fanout_max_ms)
  lead_notify_p50=$(lead_key notify_p50_ms); lead_notify_p99=$(lead_key notify_p99_ms)
  [[ -n $lead_line ]] || { tail -5 "$W/admitwatch.log" >&2; missing+=("admitwatch"); }
  say "${lead_line:-admitwatch: no figures (see $W/admitwatch.log)}"
  kill -TERM $l1 $nspid 2>/dev/null; wait $nspid 2>/dev/null
  for _ in $(seq 50); do kill -0 $l1 2>/dev/null || break; sleep 0.1; done
  # The section's people and tokens (a few hundred MB) go now rather than
  # expiring all at once ten minutes into the later sections.
  redis-cli -p "$RP" --scan --pattern "wr:{$LQ}:*" | xargs -r -n 10000 redis-cli -p "$RP" UNLINK >/dev/null
}

if [[ ${BENCH_ONLY:-} == leader ]]; then
  lead_run
  say "BENCH_ONLY=leader: $lead_issued issued of $lead_expected in $lead_secs s at $LEAD_RATE/s (rate error $lead_err %); inversions ${lead_inv:-?}, duplicates ${lead_dup:-?}; fan-out to $lead_fan_n of $lead_fan_adm admitted streams: p50 $lead_fan_p50 ms, p99 $lead_fan_p99 ms, max $lead_fan_max ms; broker p99 $lead_amqp_p99 ms; BENCHMARKS.md not written"
  exit 0
fi
if [[ ${BENCH_ONLY:-} != million ]]; then
# ---------------------------------------------------------------- 1. gateway vs ceilings
NTOK=300000; TN=${TICKET_LINE:-100000}
"$W/bin/loadgen" -mint $NTOK -user-prefix bu- >"$W/tokens.txt"
putq gw '{"state":"OPEN","admissionRatePerSec":175,"maxQueueSize":50000000,"maxWaitSeconds":604800}'
WRKCMD="wrk -t$WRK_T -c$WRK_C -d$WRK_D --latency -s deploy/bench/tokens.lua <url>  (TOKENS=<file of pre-signed JWTs> METHOD=GET|POST)"
if have wrk; then
  say "wrk: gateway enter"
  read -r e_rps e_p50 e_p99 e_bad < <(wrkrun enter POST "$W/tokens.txt" "$GW/api/v1/queues/gw/enter")
  waiting=$($RC ZCARD 'wr:{gw}:waiting')
  head -n "$waiting" "$W/tokens.txt" >"$W/tokens-waiting.txt"
  say "wrk: gateway position ($waiting waiting)"
  read -r p_rps p_p50 p_p99 p_bad < <(wrkrun position GET "$W/tokens-waiting.txt" "$GW/api/v1/queues/gw/position")
  BP=$(freeport)
  "$W/bin/bare" -addr 127.0.0.1:$BP & BAREPID=$!; pids+=($BAREPID); sleep 0.5
  say "wrk: bare net/http"
  read -r b_rps b_p50 b_p99 b_bad < <(wrkrun bare GET "$W/tokens-waiting.txt" "http://127.0.0.1:$BP/api/v1/queues/gw/position")
  # Polls with tickets: a line of $TN written straight into Redis (places
  # 1..N, no dispatcher), a JWT and a ticket per person from loadgen.
  TQ=tk
  putq $TQ '{"state":"OPEN","admissionRatePerSec":175,"maxQueueSize":50000000,"maxWaitSeconds":604800}'
  $RC EVAL "for i = 1, tonumber(ARGV[1]) do redis.call('ZADD', KEYS[1], i, ARGV[2] .. (i - 1)) end redis.call('SET', KEYS[2], ARGV[1]) return 1" \
    2 "wr:{$TQ}:waiting" "wr:{$TQ}:seq" "$TN" tk- >/dev/null
  tgen=$($RC HGET "wr:{$TQ}:config" createdAtMs)
  "$W/bin/loadgen" -mint "$TN" -user-prefix tk- -queue $TQ -ticket-generation "$tgen" >"$W/tickets.txt"
  # The first poll makes the gateway track the queue; its frontier comes
  # within 100 ms.
  curl -fsS "$GW/api/v1/queues/$TQ/position" -H "Authorization: Bearer $(head -1 "$W/tickets.txt" | cut -d' ' -f1)" \
    -H "X-Queue-Ticket: $(head -1 "$W/tickets.txt" | cut -d' ' -f2)" >/dev/null; sleep 0.5
  frontier_reads() { curl -fsS "http://$OPS/metrics" | awk '/^waitingroom_gateway_position_reads_total\{source="frontier"\}/ {print $2}'; }
  # Warm-up: one pass over the tokens, so each JWT was verified once (a
  # person polls for minutes with one token; the verifier caches it).
  TOKENS=$W/tickets.txt METHOD=GET WRK_THREADS=$WRK_T wrk -t$WRK_T -c$WRK_C -d$(( TN / 8000 + 2 ))s -s deploy/bench/tokens.lua \
    "$GW/api/v1/queues/$TQ/position" >"$W/wrk-tickets-warm.txt" 2>&1
  c0=$(cmdcalls); f0=$(frontier_reads)
  say "wrk: gateway position with tickets ($TN waiting)"
  read -r t_rps t_p50 t_p99 t_bad < <(wrkrun tickets GET "$W/tickets.txt" "$GW/api/v1/queues/$TQ/position")
  c1=$(cmdcalls); f1=$(frontier_reads)
  t_reqs=$(awk '/requests in/ {print $1}' "$W/wrk-tickets.txt")
  t_cpp=$(calc "round(($c1 - $c0 - 1) / max(1, ${t_reqs:-0}), 4)")
  t_front=$(calc "round((${f1:-0} - ${f0:-0}) / max(1, ${t_reqs:-0}), 4)")
  say "tickets: $t_rps req/s, p99 $t_p99, $t_cpp Redis commands a poll, $t_front from the frontier"
  # Against bare, interleaved: this VM's speed drifts by tens of percent
  # from one 10 s run to the next, so the ratio is the median of three
  # back-to-back pairs of 5 s runs (tickets, then bare).
  pairs=""
  for i in 1 2 3; do
    read -r ti _ _ _ < <(WRK_D=5s wrkrun tickets-pair$i GET "$W/tickets.txt" "$GW/api/v1/queues/$TQ/position")
    read -r bi _ _ _ < <(WRK_D=5s wrkrun bare-pair$i GET "$W/tokens-waiting.txt" "http://127.0.0.1:$BP/api/v1/queues/gw/position")
    pairs="$pairs $ti/$bi"
  done
  t_ratio=$(python3 -c "import statistics,sys; print(f'{statistics.median(float(a)/float(b) for a,b in (p.split(\"/\") for p in sys.argv[1:])):.2f}')" $pairs)
  t_pairs=$(python3 -c "import sys; print(', '.join(f'{float(a):.0f} / {float(b):.0f}' for a,b in (p.split('/') for p in sys.argv[1:])))" $pairs)
  say "tickets against bare, interleaved pairs ($t_pairs): median ratio $t_ratio"
  kill $BAREPID
  # The same polls with presence on (awayAfterSeconds 10): all $TN people
  # tracked (a sighting each, as enter writes it); the gateway sends its
  # sightings once a second, one script call a line.
  putq $TQ '{"awayAfterSeconds":10}'
  $RC EVAL "local ms = redis.call('TIME')[1] * 1000 for i = 1, tonumber(ARGV[1]) do redis.call('ZADD', KEYS[1], ms, ARGV[2] .. (i - 1)) end return 1" \
    1 "wr:{$TQ}:seen" "$TN" tk- >/dev/null
  sleep 1.5 # the gateway's configuration cache learns the knob
  evalcalls() { $RC INFO commandstats | awk -F'[=,]' '/^cmdstat_eval(sha)?:/ {s += $2} END {print s+0}'; }
  rcpu() { $RC INFO cpu | awk -F: '/^used_cpu_(sys|user):/ {s += $2} END {print s}'; }
  sighted() { curl -fsS "http://$OPS/metrics" | awk '/^waitingroom_presence_sightings_total\{/ {s += $2} END {print s+0}'; }
  c0=$(cmdcalls); e0=$(evalcalls); u0=$(rcpu); s0=$(sighted)
  say "wrk: gateway position with tickets, presence on ($TN tracked)"
  read -r tp_rps tp_p50 tp_p99 tp_bad < <(wrkrun tickets-presence GET "$W/tickets.txt" "$GW/api/v1/queues/$TQ/position")
  sleep 1.5 # the last batch
  c1=$(cmdcalls); e1=$(evalcalls); u1=$(rcpu); s1=$(sighted)
  tp_reqs=$(awk '/requests in/ {print $1}' "$W/wrk-tickets-presence.txt")
  tp_cpp=$(calc "round(($c1 - $c0 - 4) / max(1, ${tp_reqs:-0}), 4)")
  tp_calls=$(calc "round(($e1 - $e0) / max(1, ${tp_reqs:-0}), 5)")
  tp_sightings=$(calc "int($s1 - $s0)")
  tp_cpu=$(calc "round(($u1 - $u0) * 1e6 / max(1, $s1 - $s0), 2)")
  tp_ratio=$(calc "round(${tp_rps:-0} / max(1e-9, float('${t_rps:-0}' or 0)), 2)")
  say "tickets with presence: $tp_rps req/s (p99 $tp_p99), $tp_calls script calls and $tp_cpp Redis commands a poll, $tp_sightings sightings sent, Redis CPU $tp_cpu µs a sighting; $tp_ratio of presence off"
  putq $TQ '{"awayAfterSeconds":0}'
else
  missing+=("wrk"); e_rps=0; p_rps=0; b_rps=0; t_rps=0; t_ratio=n/a; t_pairs=n/a
  tp_rps=0; tp_p99='?'; tp_calls='?'; tp_cpp='?'; tp_sightings=0; tp_cpu='?'; tp_ratio=n/a
fi
if [[ ${BENCH_ONLY:-} == gateway ]]; then
  say "BENCH_ONLY=gateway: enter $e_rps req/s; position $p_rps req/s (p99 $p_p99); tickets $t_rps req/s (p99 $t_p99, $t_cpp commands a poll); bare $b_rps req/s; tickets/bare pairs $t_pairs, median $t_ratio; BENCHMARKS.md not written"
  exit 0
fi
# redis-benchmark: the position script itself (EVALSHA, same keys) and bare ZRANK
SHA=$( { cat pkg/redisstore/lua/prelude.lua; echo; cat pkg/redisstore/lua/position.lua; } | $RC -x SCRIPT LOAD )
RBN=${RB_N:-300000}; [[ $QUICK == 1 ]] && RBN=100000
RBCMD_E="redis-benchmark -p <port> -c $WRK_C -n $RBN -q EVALSHA <sha of prelude+position.lua> 5 'wr:{gw}:config' 'wr:{gw}:waiting' 'wr:{gw}:token:bu-77' 'wr:{gw}:status:bu-77' 'wr:{gw}:dispatch' bu-77"
say "redis-benchmark"
rb_eval=$(redis-benchmark -p "$RP" -c "$WRK_C" -n "$RBN" -q EVALSHA "$SHA" 5 'wr:{gw}:config' 'wr:{gw}:waiting' 'wr:{gw}:token:bu-77' 'wr:{gw}:status:bu-77' 'wr:{gw}:dispatch' bu-77 2>&1 | tr '\r' '\n' | grep 'requests per second' | tail -1)
rb_zrank=$(redis-benchmark -p "$RP" -c "$WRK_C" -n "$RBN" -q ZRANK 'wr:{gw}:waiting' bu-77 2>&1 | tr '\r' '\n' | grep 'requests per second' | tail -1)
ev_rps=$(sed -E 's/.*: ([0-9.]+) requests per second.*/\1/' <<<"$rb_eval")
zr_rps=$(sed -E 's/.*: ([0-9.]+) requests per second.*/\1/' <<<"$rb_zrank")

# ---------------------------------------------------------------- 2. pprof of the gateway under position load
PT=5; [[ $QUICK == 1 ]] && PT=3
gw_cpu_note=""
if have wrk; then
  say "pprof: the gateway process (its ops listener, PPROF_ENABLED) under a ${PT} s position load"
  rpid=$(pgrep -f "redis-server 127.0.0.1:$RP" | head -1)
  t0=$(awk '{print $14+$15}' /proc/$GWPID/stat)
  rt0=$(awk '{print $14+$15}' /proc/$rpid/stat 2>/dev/null || echo 0)
  curl -fsS "http://$OPS/debug/pprof/profile?seconds=$PT" -o "$W/cpu.out" & cpid=$!
  TOKENS=$W/tokens-waiting.txt METHOD=GET WRK_THREADS=$WRK_T wrk -t$WRK_T -c$WRK_C -d${PT}s -s deploy/bench/tokens.lua "$GW/api/v1/queues/gw/position" >"$W/wrk-cpu.txt" 2>&1
  wait $cpid
  t1=$(awk '{print $14+$15}' /proc/$GWPID/stat)
  rt1=$(awk '{print $14+$15}' /proc/$rpid/stat 2>/dev/null || echo 0)
  hz=$(getconf CLK_TCK)
  gw_cpu_note="During a ${PT} s position run the gateway used $(calc "round(($t1-$t0)/$hz/$PT*100)") % CPU and redis-server $(calc "round(($rt1-$rt0)/$hz/$PT*100)") % (of 200 % on 2 cores); wrk took the rest."
  PBIN=$W/bin/queue-gateway
  prof_how="the running gateway, through its ops listener (PPROF_ENABLED=true): \`curl http://\$OPS_ADDR/debug/pprof/profile?seconds=$PT\` while
\`wrk -c$WRK_C\` ran GET position (line of $waiting) for the same ${PT} s, then \`go tool pprof -top\`."
  prof_head="wrk during the profile: $(awk '/Requests\/sec/ {print $2}' "$W/wrk-cpu.txt") requests/s"
else
  say "pprof: BenchmarkPosition (wrk missing: the store benchmark stands in for the gateway)"
  go test -run '^$' -bench 'BenchmarkPosition$' -benchtime ${PT}s -cpuprofile "$W/cpu.out" -o "$W/redisstore.test" ./pkg/redisstore/ >"$W/pprof-bench.txt" 2>&1
  PBIN=$W/redisstore.test
  prof_how="wrk is missing, so this is the position path's Go side in the store benchmark:
\`go test -run '^\$' -bench 'BenchmarkPosition\$' -benchtime ${PT}s -cpuprofile cpu.out ./pkg/redisstore/\` (64 parallel callers, line of 10,000)."
  prof_head=$(grep -E '^Benchmark' "$W/pprof-bench.txt")
fi
go tool pprof -top -nodecount 15 "$PBIN" "$W/cpu.out" >"$W/pprof-top.txt" 2>/dev/null
go tool pprof -top -cum -nodecount 25 "$PBIN" "$W/cpu.out" >"$W/pprof-cum.txt" 2>/dev/null
go tool pprof -top -cum -nodecount 100 "$PBIN" "$W/cpu.out" >"$W/pprof-cum-all.txt" 2>/dev/null
kill $GWPID 2>/dev/null; wait $GWPID 2>/dev/null

# ---------------------------------------------------------------- 3. Redis memory per waiting user
say "redis memory at 1,000,000 waiting"
NMEM=${MEM_USERS:-1000000}
$RC FLUSHALL >/dev/null
mem0=$($RC INFO memory | awk -F: '/^used_memory:/ {print $2+0}')
# What the enter script writes per user: ZADD NX of the user id with the next
# sequence as score (plus one INCR of the shared seq). User ids as in the
# loadgen ("lg<base36 time>-<n>", ~14 bytes).
python3 - "$NMEM" >"$W/fill-mem.resp" <<'PY'
import sys
n=int(sys.argv[1]); out=sys.stdout.buffer
def cmd(*a):
    out.write(b"*%d\r\n" % len(a))
    for x in a:
        x = x if isinstance(x, bytes) else str(x).encode()
        out.write(b"$%d\r\n%s\r\n" % (len(x), x))
key=b"wr:{mem}:waiting"
for i in range(1, n+1):
    cmd(b"ZADD", key, b"NX", i, b"lgt2kq3f-%d" % i)
cmd(b"SET", b"wr:{mem}:seq", n)
PY
$RC --pipe <"$W/fill-mem.resp" >"$W/fill-mem.log" 2>&1
mem1=$($RC INFO memory | awk -F: '/^used_memory:/ {print $2+0}')
memcnt=$($RC ZCARD 'wr:{mem}:waiting')
mem_per=$(calc "round(($mem1-$mem0)/$memcnt,1)")
$RC FLUSHALL >/dev/null

fi # BENCH_ONLY=million skips to here

# ---------------------------------------------------------------- 3b. a million people in one queue
# One gateway, one Redis node, no dispatcher. 900,000 places written
# straight into Redis, then POST enter through the gateway (fresh users) on
# top of them for the wrk window, then the rest written to reach BIG_LINE;
# then ticket polls from 100,000 people spread over the whole line.
BIG=${BIG_LINE:-1000000}; BIG_PRE=$(( BIG * 9 / 10 ))
say "a line of $BIG in one queue"
GP=$(freeport); GW=http://127.0.0.1:$GP; OPS=127.0.0.1:$(freeport)
AUTH_DEV_MODE=true ENTER_RATE_LIMIT_PER_IP=0 POSITION_RATE_LIMIT_PER_USER=0 PUBLIC_RATE_LIMIT_PER_IP=0 LOG_LEVEL=error HTTP_ADDR=127.0.0.1:$GP OPS_ADDR=$OPS "$W/bin/queue-gateway" >>"$W/gateway.log" 2>&1 &
GWPID=$!; pids+=($GWPID)
for _ in $(seq 100); do curl -fsS "$GW/readyz" >/dev/null 2>&1 && break; sleep 0.1; done
ADMIN=$(curl -fsS -X POST "$GW/api/v1/dev/token" -H 'Content-Type: application/json' -d '{"userId":"bench-admin","role":"admin"}' | jq -r .token)
putq big '{"state":"OPEN","admissionRatePerSec":175,"maxQueueSize":50000000,"maxWaitSeconds":604800}'
big_mem0=$($RC INFO memory | awk -F: '/^used_memory:/ {print $2+0}')
fill_big() { # from to prefix: places from..to (1-based) for users <prefix><place-1>; seq = to
  python3 - "$1" "$2" "$3" >"$W/fill-big.resp" <<'PY'
import sys
a, b, prefix = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3].encode(); out = sys.stdout.buffer
def cmd(*xs):
    out.write(b"*%d\r\n" % len(xs))
    for x in xs:
        x = x if isinstance(x, bytes) else str(x).encode()
        out.write(b"$%d\r\n%s\r\n" % (len(x), x))
for i in range(a, b + 1):
    cmd(b"ZADD", b"wr:{big}:waiting", b"NX", i, prefix + b"%d" % (i - 1))
cmd(b"SET", b"wr:{big}:seq", b)
PY
  $RC --pipe <"$W/fill-big.resp" >>"$W/fill-big.log" 2>&1
}
fill_big 1 "$BIG_PRE" bm-
big_e_rps=0; big_e_p99='?'
if have wrk; then
  "$W/bin/loadgen" -mint $(( BIG - BIG_PRE )) -user-prefix be- >"$W/tokens-big-enter.txt"
  say "wrk: enter into a line of $BIG_PRE"
  read -r big_e_rps _ big_e_p99 _ < <(wrkrun big-enter POST "$W/tokens-big-enter.txt" "$GW/api/v1/queues/big/enter")
fi
# The rest, after whoever entered through the gateway.
seq_now=$($RC GET 'wr:{big}:seq'); have_now=$($RC ZCARD 'wr:{big}:waiting')
if (( have_now < BIG )); then
  fill_big $(( seq_now + 1 )) $(( seq_now + BIG - have_now )) bt-
fi
big_n=$($RC ZCARD 'wr:{big}:waiting')
big_mem1=$($RC INFO memory | awk -F: '/^used_memory:/ {print $2+0}')
big_mem_per=$(calc "round(($big_mem1 - $big_mem0) / max(1, $big_n), 1)")
big_t_rps=0; big_t_p99='?'; big_cpp='?'; big_cpu='?'
if have wrk; then
  bgen=$($RC HGET 'wr:{big}:config' createdAtMs)
  BSTRIDE=$(( BIG_PRE / 100000 ))
  "$W/bin/loadgen" -mint 100000 -stride "$BSTRIDE" -user-prefix bm- -queue big -ticket-generation "$bgen" >"$W/tickets-big.txt"
  curl -fsS "$GW/api/v1/queues/big/position" -H "Authorization: Bearer $(head -1 "$W/tickets-big.txt" | cut -d' ' -f1)" \
    -H "X-Queue-Ticket: $(head -1 "$W/tickets-big.txt" | cut -d' ' -f2)" >/dev/null; sleep 0.5
  TOKENS=$W/tickets-big.txt METHOD=GET WRK_THREADS=$WRK_T wrk -t$WRK_T -c$WRK_C -d14s -s deploy/bench/tokens.lua \
    "$GW/api/v1/queues/big/position" >"$W/wrk-big-warm.txt" 2>&1
  c0=$(cmdcalls); g0=$(awk '{print $14+$15}' /proc/$GWPID/stat)
  say "wrk: ticket polls in a line of $big_n"
  read -r big_t_rps _ big_t_p99 _ < <(wrkrun big-tickets GET "$W/tickets-big.txt" "$GW/api/v1/queues/big/position")
  c1=$(cmdcalls); g1=$(awk '{print $14+$15}' /proc/$GWPID/stat)
  big_reqs=$(awk '/requests in/ {print $1}' "$W/wrk-big-tickets.txt")
  big_cpp=$(calc "round(($c1 - $c0 - 1) / max(1, ${big_reqs:-0}), 4)")
  big_cpu=$(calc "round(($g1 - $g0) / $(getconf CLK_TCK) * 1000 / max(1, ${big_reqs:-0}) * 1000, 1)")
fi
say "a line of $big_n: enter $big_e_rps/s (p99 $big_e_p99), $big_mem_per bytes/person, ticket polls $big_t_rps/s (p99 $big_t_p99), $big_cpp commands/poll, gateway $big_cpu ms CPU per 1,000 polls"
kill $GWPID 2>/dev/null; wait $GWPID 2>/dev/null
$RC FLUSHALL >/dev/null
if [[ ${BENCH_ONLY:-} == million ]]; then
  say "BENCH_ONLY=million: BENCHMARKS.md not written"
  exit 0
fi

# ---------------------------------------------------------------- 4. dispatcher
say "dispatcher accuracy, ramp and failover"
GP=$(freeport); GW=http://127.0.0.1:$GP
AUTH_DEV_MODE=true ENTER_RATE_LIMIT_PER_IP=0 POSITION_RATE_LIMIT_PER_USER=0 PUBLIC_RATE_LIMIT_PER_IP=0 LOG_LEVEL=error HTTP_ADDR=127.0.0.1:$GP OPS_ADDR=127.0.0.1:$(freeport) "$W/bin/queue-gateway" >>"$W/gateway.log" 2>&1 &
GWPID=$!; pids+=($GWPID)
for _ in $(seq 100); do curl -fsS "$GW/readyz" >/dev/null 2>&1 && break; sleep 0.1; done
# 4b first, on a Redis without the ramp's line of millions (and its enter
# times) and without the ramp's tokens: one leader's own queue, measured as
# it would run on a Redis of its own; it deletes its keys when done.
lead_run
DQ=disp-$$
NFILL=${DISP_FILL:-3000000}; [[ $QUICK == 1 ]] && NFILL=1000000
putq $DQ '{"state":"PAUSED","admissionRatePerSec":175,"maxQueueSize":50000000,"maxWaitSeconds":604800,"tokenTtlSeconds":600}'
fill_line $DQ "$NFILL"
say "filled $($RC ZCARD "wr:{$DQ}:waiting") waiting"
D1=$(startdisp d1 "$(freeport)"); pids+=($D1)
sleep 1.5
measure() { # rate seconds -> "issued expected pct"
  putq $DQ "{\"state\":\"OPEN\",\"admissionRatePerSec\":$1}"
  sleep 1.2
  local a ta b tb
  a=$(issued); ta=$(now); sleep "$2"; b=$(issued); tb=$(now)
  calc "f'{$b-$a} {$1*($tb-$ta):.0f} {($b-$a)/($1*($tb-$ta))*100:.2f}'"
}
read -r i175 e175 p175 < <(measure 175 "$DISP_WIN")
say "175/s: $i175 of $e175 ($p175 %)"
read -r i10k e10k p10k < <(measure 10000 "$DISP_WIN")
say "10000/s: $i10k of $e10k ($p10k %)"
ramp_rows=""; best=10000
for r in 20000 30000 50000 75000 100000; do
  left=$($RC ZCARD "wr:{$DQ}:waiting")
  (( left < r * (RAMP_WIN + 3) )) && { ramp_rows+="| $r | (line too short: $left left) | | |"$'\n'; break; }
  read -r ir er pr < <(measure $r $RAMP_WIN)
  ramp_rows+="| $r | $ir | $er | $pr % |"$'\n'
  say "$r/s: $ir of $er ($pr %)"
  if python3 -c "import sys; sys.exit(0 if $pr >= 97 else 1)"; then best=$r; else break; fi
done
outbox=$($RC XLEN "wr:{$DQ}:outbox")
# failover: a second replica, SIGKILL the leader, time to the next admission
putq $DQ '{"state":"OPEN","admissionRatePerSec":175}'
D2=$(startdisp d2 "$(freeport)"); pids+=($D2)
sleep 2
lock=$($RC GET "wr:{$DQ}:lock")
if [[ $lock == *d1* ]]; then LEADER=$D1; LNAME=d1; else LEADER=$D2; LNAME=d2; fi
# Poll issuedTotal every 20 ms from 1 s before the kill to 10 s after; the
# gap is the longest time without a new admission around the kill (a tick the
# dead leader had already sent may still land just after the SIGKILL).
FO_AFTER=10; [[ $QUICK == 1 ]] && FO_AFTER=6
gap=$(python3 - "$RP" "$DQ" "$LEADER" "$FO_AFTER" <<'PY'
import subprocess, sys, time, os, signal
port, q, leader, after = sys.argv[1], sys.argv[2], int(sys.argv[3]), float(sys.argv[4])
def issued():
    out = subprocess.run(["redis-cli", "-p", port, "HGET", "wr:{%s}:dispatch" % q, "issuedTotal"], capture_output=True, text=True).stdout.strip()
    return int(out or 0)
t0 = time.time(); last_v = issued(); last_t = t0; kill_t = None; first = None; changes = []
while True:
    now = time.time()
    if kill_t is None and now - t0 >= 1.0:
        os.kill(leader, signal.SIGKILL); kill_t = now; v_kill = last_v
    v = issued()
    if v != last_v:
        changes.append((last_t, now)); last_v = v; last_t = now
    if kill_t and now - kill_t >= after:
        break
    time.sleep(0.02)
gap = max((b - a for a, b in changes if b >= kill_t), default=after)
print(f"{gap:.2f} {last_v - v_kill} {round(175 * (now - kill_t))} {now - kill_t:.1f}")
PY
)
read -r gap fo_issued fo_expected fo_secs <<<"$gap"
newlock=$($RC GET "wr:{$DQ}:lock")
for p in $D1 $D2; do kill -TERM "$p" 2>/dev/null; done
kill $GWPID 2>/dev/null
sleep 1

# ---------------------------------------------------------------- 5. Postgres hot row
# One run, one product row, one server: the order path with group commit,
# the order path a transaction an order (the path before group commit) and
# pgbench's bare conditional UPDATE of the same row, each at full speed
# (40 clients) and then open-loop at 80 % of its maximum for p50/p99.
say "orders on one hot row: BenchmarkHotRowSideBySide"
have pgbench || missing+=("pgbench")
HOT_S=10; [[ $QUICK == 1 ]] && HOT_S=4
BENCH_HOTROW_SECONDS=$HOT_S go test -run '^$' -bench HotRowSideBySide -benchtime 1x -timeout 20m ./services/order-service/internal/pg/ >"$W/hotrow.txt" 2>&1
hot_line=$(grep -E '^BenchmarkHotRowSideBySide' "$W/hotrow.txt" | tail -1)
hotm() { grep -oE "[0-9.]+ $1([[:space:]]|$)" <<<"$hot_line" | awk '{print $1}' | head -1; }
hot_group=$(hotm 'group-orders/s'); hot_alone=$(hotm 'alone-orders/s'); pg_tps=$(hotm 'pgbench-tps')
hot_vs_pg=$(hotm 'group/pgbench'); hot_vs_alone=$(hotm 'group/alone')
hot_g50=$(hotm 'group-p50-ms@80%'); hot_g99=$(hotm 'group-p99-ms@80%')
hot_a50=$(hotm 'alone-p50-ms@80%'); hot_a99=$(hotm 'alone-p99-ms@80%')
hot_b50=$(hotm 'pgbench-p50-ms@80%'); hot_b99=$(hotm 'pgbench-p99-ms@80%')
[[ -n $hot_line ]] || { tail -20 "$W/hotrow.txt"; missing+=("BenchmarkHotRowSideBySide"); }

# ---------------------------------------------------------------- 6. SSE
say "SSE: BenchmarkStreams (10,000 streams)"
go test -run '^$' -bench Streams -benchtime 1x -timeout 10m -v ./services/notification-service/internal/wire/ >"$W/sse.txt" 2>&1
sse_line=$(grep -E '^BenchmarkStreams' "$W/sse.txt" | tail -1)
sse_rss=$(grep -oE '[0-9.e+]+ rss-bytes/stream' <<<"$sse_line" | awk '{print $1}')
sse_p50=$(grep -oE '[0-9.]+ p50-lag-ms' <<<"$sse_line" | awk '{print $1}')
sse_p99=$(grep -oE '[0-9.]+ p99-lag-ms' <<<"$sse_line" | awk '{print $1}')
sse_heap=$(grep -oE '[0-9.e+]+ heap-bytes/stream' <<<"$sse_line" | awk '{print $1}')
sse_stack=$(grep -oE '[0-9.e+]+ stack-bytes/stream' <<<"$sse_line" | awk '{print $1}')
sse_gor=$(grep -oE '[0-9.e+]+ goroutines/stream' <<<"$sse_line" | awk '{print $1}')
sse_log=$(grep -E 'streams: RSS' "$W/sse.txt" | sed 's/^ *//' | tail -1)

# ---------------------------------------------------------------- 7. pre-queue draw
say "draw of a 100,000 pre-queue: BenchmarkDraw100k"
go test -run '^$' -bench 'BenchmarkDraw100k$' -benchtime 3x ./pkg/redisstore/ >"$W/draw.txt" 2>&1
draw_ns=$(awk '/^BenchmarkDraw100k/ {print $3; exit}' "$W/draw.txt")
draw_s=$(python3 -c "print(f'{float(\"${draw_ns:-0}\")/1e9:.2f}')")

# ---------------------------------------------------------------- 7b. one queue split into lines
say "enters into one queue of 1 and of 3 lines on a 3-master cluster: BenchmarkShardedEnter"
go test -run '^$' -bench 'BenchmarkShardedEnter$' -benchtime 30000x ./pkg/redisstore/ >"$W/sharded.txt" 2>&1
shard_fig() { # shards metric
  grep -E "^BenchmarkShardedEnter/shards=$1-" "$W/sharded.txt" | grep -oE "[0-9.]+ $2" | awk '{print $1}'
}
sh1_eps=$(shard_fig 1 enters/s); sh3_eps=$(shard_fig 3 enters/s)
sh1_cpu=$(shard_fig 1 'redis-cpu-us/enter'); sh3_cpu=$(shard_fig 3 'redis-cpu-us/enter')
sh1_busy=$(shard_fig 1 'busiest-master-cpu-us/enter'); sh3_busy=$(shard_fig 3 'busiest-master-cpu-us/enter')
sharded_lines=$(grep -E '^BenchmarkShardedEnter' "$W/sharded.txt")
# Where the lines land: 20 queues of 3 lines on a 3-master cluster.
go test -count=1 -run '^TestLinesAreSpreadOverTheMasters$' -v ./pkg/redisstore/ >"$W/spread.txt" 2>&1 || missing+=("TestLinesAreSpreadOverTheMasters")
spread_line=$(grep -oE '20 queues of 3 lines.*' "$W/spread.txt" | head -1)

# ---------------------------------------------------------------- 7d. ticket polls at their pace
# 1,000 people far back polling with tickets at the Retry-After they are
# told, on one Redis and on a 3-master cluster; every command the
# gateway's Redis client sends is counted.
say "ticket polls at their pace: TestATicketPollCostsRedisAlmostNothing"
go test -count=1 -run '^TestATicketPollCostsRedisAlmostNothing$' -v ./services/queue-gateway/internal/httpapi/ >"$W/pollcost.txt" 2>&1 || missing+=("TestATicketPollCostsRedisAlmostNothing")
poll_one=$(grep 'polls in' "$W/pollcost.txt" | sed -n 1p | grep -oE '[0-9.]+ a poll' | awk '{print $1}')
poll_cluster=$(grep 'polls in' "$W/pollcost.txt" | sed -n 2p | grep -oE '[0-9.]+ a poll' | awk '{print $1}')
poll_lines=$(grep -E 'polls in|--- (PASS|FAIL): TestATicketPollCostsRedisAlmostNothing/' "$W/pollcost.txt" | sed 's/^ *//')

# ---------------------------------------------------------------- 7c. acknowledged once replicated
say "enters and admissions with one replica, waiting for it (WAIT) or not: BenchmarkEnterReplicated, BenchmarkAdmitReplicated"
go test -run '^$' -bench 'Benchmark(Enter|Admit)Replicated$' -benchtime 3s ./pkg/redisstore/ >"$W/replicated.txt" 2>&1
repl_fig() { # benchmark replicas metric
  grep -E "^Benchmark$1Replicated/replicas=$2-" "$W/replicated.txt" | grep -oE "[0-9.]+ $3" | awk '{print $1}'
}
re0=$(repl_fig Enter 0 enters/s); re1=$(repl_fig Enter 1 enters/s)
ra0=$(repl_fig Admit 0 admissions/s); ra1=$(repl_fig Admit 1 admissions/s)
replicated_lines=$(grep -E '^Benchmark(Enter|Admit)Replicated' "$W/replicated.txt")

# ---------------------------------------------------------------- 8. adaptive admission drill
say "adaptive vs fixed admission under a slow database: TestAdaptiveAdmissionFollowsASlowDatabase"
(cd deploy/e2e && go test -count=1 -run 'TestAdaptiveAdmissionFollowsASlowDatabase$' -v . >"$W/adaptive.txt" 2>&1) || true
adaptive_fig=$(grep -oE '(ADAPTIVE|FIXED): of the people admitted during the fault.*' "$W/adaptive.txt" | sed 's/of the people admitted during the fault, //' | paste -sd ';' -)

say "the waiting page's first load: make lighthouse"
lighthouse=$(OUT="$W/lighthouse" deploy/bench/lighthouse.sh 2>&1 | grep '^lighthouse (' | sed 's/; report .*//') || true
adaptive_times=$(grep -oE 'below half in .*' "$W/adaptive.txt" | head -1)

# ---------------------------------------------------------------- write BENCHMARKS.md
ratio() { python3 -c "a,b=float('${1:-0}' or 0),float('${2:-0}' or 0); print(f'{a/b:.2f}' if b else 'n/a')"; }
cpu=$(awk -F': ' '/model name/ {print $2; exit}' /proc/cpuinfo)
ncpu=$(nproc)
memtot=$(free -m | awk '/^Mem:/ {print $2" MiB total, "$7" MiB available"}')
{
cat <<MD
# Benchmarks

Measured by \`make bench\` (deploy/bench/bench.sh) on $(date -u '+%Y-%m-%d %H:%M UTC')$( [[ $QUICK == 1 ]] && echo ' with BENCH_QUICK=1 (shortened runs)' ).

**Machine**: $cpu, $ncpu cores; memory $memtot; $(uname -sr); load average before the run: ${LOAD_BEFORE:-$(cut -d' ' -f1-3 /proc/loadavg)}.
$(redis-server --version | cut -d' ' -f1-3), $(psql --version 2>/dev/null), $(go version | cut -d' ' -f3), $(wrk --version 2>&1 | head -1 | cut -d' ' -f1-2).
This is a small, shared, noisy VM: the load generator, the service and the
server under test share two cores, so every figure below is a floor for the
code and the ratios matter more than the absolute numbers. Re-run \`make bench\`
to refresh this file.
$( ((${#missing[@]})) && echo "**Not measured** (tool missing): ${missing[*]}." )

## Summary

| what | measured | ceiling on this machine | ratio |
|---|---|---|---|
| gateway \`GET /position\` ($WRK_C connections) | ${p_rps} req/s (p50 ${p_p50}, p99 ${p_p99}) | bare net/http: ${b_rps} req/s; redis-benchmark EVALSHA position: ${ev_rps} req/s | $(ratio "$p_rps" "$b_rps") of bare, $(ratio "$p_rps" "$ev_rps") of Redis |
| gateway \`GET /position\` with tickets, $TN waiting ($WRK_C connections) | ${t_rps} req/s (p50 ${t_p50}, p99 ${t_p99}); ${t_cpp} Redis commands a poll (INFO commandstats); ${t_front} of polls answered from the frontier | bare net/http: ${b_rps} req/s; interleaved 5 s pairs, tickets / bare: ${t_pairs} req/s | ${t_ratio} of bare (median of the pairs; without tickets: $(ratio "$p_rps" "$b_rps")) |
| the same, presence on (\`awayAfterSeconds\` 10, all $TN tracked) | ${tp_rps} req/s (p99 ${tp_p99}); ${tp_calls} Redis script calls and ${tp_cpp} Redis commands a poll; ${tp_sightings} sightings sent, ${tp_cpu} µs of Redis CPU a sighting | presence off: ${t_rps} req/s | ${tp_ratio} of presence off |
| gateway \`POST /enter\` ($WRK_C connections) | ${e_rps} req/s (p50 ${e_p50}, p99 ${e_p99}) | bare net/http: ${b_rps} req/s | $(ratio "$e_rps" "$b_rps") of bare |
| admission accuracy at 175/s (${DISP_WIN} s) | ${i175} issued of ${e175} expected | | ${p175} % |
| admission accuracy at 10,000/s (${DISP_WIN} s) | ${i10k} issued of ${e10k} expected | | ${p10k} % |
| highest rate one leader sustains (>= 97 %) | ${best}/s | | |
| one leader, one queue at ${LEAD_RATE}/s for ${LEAD_WIN} s (TOKEN_EVENTS=batch, DISPATCH_TICK=${LEAD_TICK}) | ${lead_issued:-?} admitted of ${lead_expected:-?} expected: rate error ${lead_err:-?} %; ${lead_inv:-?} inversions; TokenIssued to browser (SSE, ${lead_fan_n:-?} streams) p50 ${lead_fan_p50:-?} ms, p99 ${lead_fan_p99:-?} ms | targets: rate error <= 1 %, 0 inversions, fan-out p99 <= 250 ms | |
| failover gap after SIGKILL of the leader (default lease 600 ms, tick 100 ms) | ${gap:-not seen} s | expected 0.4 to 0.7 s (lease - time since renewal + tick) | |
| orders/s on one hot product row, group commit (BenchmarkHotRowSideBySide, 40 clients) | ${hot_group} orders/s; at 80 %: p50 ${hot_g50} ms, p99 ${hot_g99} ms | pgbench conditional UPDATE of the same row: ${pg_tps} tps (at 80 %: p50 ${hot_b50} ms, p99 ${hot_b99} ms); a transaction an order: ${hot_alone} orders/s (at 80 %: p50 ${hot_a50} ms, p99 ${hot_a99} ms) | ${hot_vs_pg} of pgbench; ${hot_vs_alone} of a transaction an order |
| Redis memory per waiting user (${memcnt} waiting) | ${mem_per} bytes | | |
| one queue of ${big_n} people, one gateway, one Redis node | enter ${big_e_rps}/s (p99 ${big_e_p99}) into a line of ${BIG_PRE}; ${big_mem_per} bytes of Redis per person; ticket polls ${big_t_rps}/s (p99 ${big_t_p99}), ${big_cpp} Redis commands a poll, ${big_cpu} ms of gateway CPU per 1,000 polls | | see docs/SCALING.md |
| SSE, 10,000 streams | ${sse_rss} bytes RSS/stream (Go heap ${sse_heap}, goroutine stacks ${sse_stack}, ${sse_gor} goroutines a stream); lag p50 ${sse_p50} ms, p99 ${sse_p99} ms | | |
| pre-queue draw of 100,000 at a start time (admission held meanwhile; BenchmarkDraw100k) | ${draw_s} s | | |
| ticket polls at their pace, 1,000 pollers on one queue (TestATicketPollCostsRedisAlmostNothing) | one Redis: ${poll_one:-?} Redis commands a poll; three-master cluster: ${poll_cluster:-?} | target: at most 0.01 | |
| enters into one queue on a 3-master cluster (64 callers; BenchmarkShardedEnter) | shards = 1: ${sh1_eps}/s, busiest master ${sh1_busy} µs of CPU an enter; shards = 3: ${sh3_eps}/s, busiest master ${sh3_busy} µs an enter | all masters: ${sh1_cpu} / ${sh3_cpu} µs an enter | $(ratio "$sh1_busy" "$sh3_busy") x less on the busiest master |
| acknowledged once one replica holds it (WAIT; BenchmarkEnterReplicated, BenchmarkAdmitReplicated; target >= 0.8 of not waiting) | enters: ${re1}/s waiting, ${re0}/s not; admissions: ${ra1}/s waiting, ${ra0}/s not | | enters $(ratio "$re1" "$re0"), admissions $(ratio "$ra1" "$ra0") of not waiting |
| adaptive vs fixed admission, order database +300 ms per round trip for 20 s (TestAdaptiveAdmissionFollowsASlowDatabase) | ${adaptive_times:-not measured} | ${adaptive_fig:-not measured} | |
| the waiting page's first load, Lighthouse 13.5.0 in Debian's Chromium (make lighthouse; targets: accessibility 100, performance 95) | ${lighthouse:-not measured} | | |

## 1. Gateway against its ceilings

Commands (the gateway and a private redis-server started by the script, dev
auth, \`ENTER_RATE_LIMIT_PER_IP=0 POSITION_RATE_LIMIT_PER_USER=0 PUBLIC_RATE_LIMIT_PER_IP=0\`, queue \`gw\` OPEN with no dispatcher, so
nobody leaves the line):

- JWTs: \`bin/loadgen -mint $NTOK -user-prefix bu- > tokens.txt\` (HS256 with the dev secret, signed locally)
- \`$WRKCMD\`, enter first (each request a new user), then position with the users now waiting ($waiting)
- bare ceiling: deploy/bench/bare (net/http, same JSON shape, no auth, no Redis) with the same wrk command
- \`$RBCMD_E\`
- \`redis-benchmark -p <port> -c $WRK_C -n $RBN -q ZRANK 'wr:{gw}:waiting' bu-77\`

| target | req/s | p50 | p99 | non-2xx |
|---|---|---|---|---|
| gateway POST enter | ${e_rps} | ${e_p50} | ${e_p99} | ${e_bad} |
| gateway GET position | ${p_rps} | ${p_p50} | ${p_p99} | ${p_bad} |
| bare net/http | ${b_rps} | ${b_p50} | ${b_p99} | ${b_bad} |
| redis-benchmark EVALSHA position.lua | ${ev_rps} | | | |
| redis-benchmark ZRANK | ${zr_rps} | | | |
| gateway GET position with a ticket ($TN waiting) | ${t_rps} | ${t_p50} | ${t_p99} | ${t_bad} |

Polls with tickets: a line of $TN written into Redis (queue \`tk\`, places
1..$TN), \`bin/loadgen -mint $TN -user-prefix tk- -queue tk -ticket-generation <createdAtMs>\`
(a JWT and that person's ticket a line; tokens.lua sends the ticket as
X-Queue-Ticket), one untimed wrk pass so every JWT was verified once, then the
measured run: ${t_cpp} Redis commands a poll (INFO commandstats, every
command including those scripts run, before and after, over the run's
requests) and ${t_front} of the polls answered from the frontier
(\`waitingroom_gateway_position_reads_total{source="frontier"}\`).

Raw redis-benchmark: \`${rb_eval}\` / \`${rb_zrank}\`.

${gw_cpu_note}

## 2. Where the time goes (pprof)

The profile is of ${prof_how}

\`\`\`
${prof_head}
$(sed -n '1,22p' "$W/pprof-top.txt" | grep -v '^File\|^Type\|^Time\|^Build\|^Showing')
\`\`\`

Cumulative (top 25):

\`\`\`
$(sed -n '1,32p' "$W/pprof-cum.txt" | grep -v '^File\|^Type\|^Time\|^Build\|^Showing')
\`\`\`

Where the time goes:

$(python3 deploy/bench/pprof_notes.py "$W/pprof-top.txt" "$W/pprof-cum-all.txt")

## 3. Admission dispatcher

One dispatcher (\`DISPATCH_QUEUES=<q> DISPATCH_TICK=100ms\`)
on a line of $NFILL users written with ZADD (as the enter script does), rate
changed live with \`PUT /admin/v1/queues/<q>\`; after 1.2 s settling,
\`HGET wr:{q}:dispatch issuedTotal\` is read before and after a window and
compared with rate x measured time. Windows are ${DISP_WIN} s (the brief asks 30 s;
shortened to keep \`make bench\` under 10 minutes) and ${RAMP_WIN} s for the ramp.
The relay publishes every TokenIssued to the local RabbitMQ at the same time
(outbox backlog at the end of the ramp: ${outbox} entries). When the backlog
reaches \`OUTBOX_MAX_BACKLOG\` (100,000 by default) the dispatcher holds
admission until the relay has drained it, so above what the relay can publish
to the broker on this machine the ramp measures the relay, not the tick.

| rate /s | issued | expected | issued / expected |
|---|---|---|---|
| 175 | ${i175} | ${e175} | ${p175} % |
| 10000 | ${i10k} | ${e10k} | ${p10k} % |
${ramp_rows}
Highest rate one leader sustained at >= 97 %: **${best}/s** (the ramp stops at the first step below 97 %, or at 100,000/s, the knob's maximum).

### One leader at ${LEAD_RATE}/s for ${LEAD_WIN} s

A queue of its own (\`lead-<pid>\`, $(( LEAD_RATE * (LEAD_WIN + 5) )) people written with ZADD as above,
their enter times with them, \`tokenTtlSeconds\` 600), one dispatcher with \`DISPATCH_TICK=${LEAD_TICK}\` and \`TOKEN_EVENTS=batch\` (one
TokensIssued message for a queue's admissions of a relay round, routing key
tokens.issued), a notification-service (\`SSE_MAX_STREAMS_PER_IP=0 SSE_POSITION_INTERVAL=1h\`)
and \`${LEAD_AWCMD:-admitwatch}\`
(deploy/loadgen/cmd/admitwatch): its own exclusive queue bound to token.issued
and tokens.issued, and $LEAD_STREAMS SSE streams of people the window admits,
each open (first frame received) before admission starts. It runs before the
ramp's queue is written (so on a Redis that holds the earlier sections' keys
only, counted below). The queue is set OPEN at ${LEAD_RATE}/s;
after 1.5 s, \`issuedTotal\` and Redis's \`TIME\` are read in one script call at
each end of the window. Inversions: over every token received, ordered by
(occurred_at, order of arrival), the tokens with a lower sequence than one
before them. Fan-out: the arrival of a stream's \`admitted\` frame minus its
token's occurred_at (the admission tick's Redis time), so it holds the outbox,
the relay, the broker and the notification-service; the broker and the
notification-service's parts are given beside it.

| figure | measured | target |
|---|---|---|
| admitted in the window | ${lead_issued:-?} of ${lead_expected:-?} expected (${lead_secs:-?} s) | |
| rate error, \|admitted - expected\| / expected | ${lead_err:-?} % | <= 1 % |
| inversions (duplicates) | ${lead_inv:-?} (${lead_dup:-?}) | 0 |
| TokenIssued to browser, ${lead_fan_n:-?} streams of ${lead_fan_adm:-?} admitted | p50 ${lead_fan_p50:-?} ms, p99 **${lead_fan_p99:-?} ms**, max ${lead_fan_max:-?} ms | p99 <= 250 ms |
| occurred_at to admitwatch's queue (outbox, relay, broker) | p50 ${lead_amqp_p50:-?} ms, p99 ${lead_amqp_p99:-?} ms | |
| the notification-service's part (frame - the token's arrival at admitwatch) | p50 ${lead_notify_p50:-?} ms, p99 ${lead_notify_p99:-?} ms | |
| tokens admitwatch saw in its window (by occurred_at), admission ticks among them, messages in the run | ${lead_aw_tokens:-?} (${lead_aw_rate:-?}/s), ${lead_ticks:-?} ticks, ${lead_msgs:-?} messages | |
| outbox backlog at the end | ${lead_outbox:-?} entries | |
| Redis keys at the start and the end of the window (a token is one key; Redis grows its key table as it passes each power of two, 1,048,576 among them) | ${lead_keys0:-?} to ${lead_keys1:-?} | |

\`${lead_line:-admitwatch gave no figures}\`

Failover: a second replica started; leader was ${LNAME} (lock \`${lock}\`);
SIGKILL, \`issuedTotal\` polled every 20 ms: the longest time without an
admission around the kill was **${gap} s** (expected: between 0.4 and 0.7 s, i.e. the
default 600 ms lease minus the time since its last renewal, renewed every 200 ms,
plus up to one tick; normal ticks are 0.1 s apart). In the ${fo_secs} s after the kill ${fo_issued} tokens were
issued against ${fo_expected} at 175/s (the new leader's first tick makes up the gap,
at most one second's worth, and carries no credit beyond it). New lock: \`${newlock}\`.

## 4. Orders on one hot row

\`BENCH_HOTROW_SECONDS=$HOT_S go test -run '^\$' -bench HotRowSideBySide -benchtime 1x ./services/order-service/internal/pg/\`
(one scratch database, one product row, the same PostgreSQL; each way runs
closed-loop with 40 orders in flight for $HOT_S s for its maximum, then
open-loop at 80 % of that maximum for $HOT_S s, latency from each order's
scheduled start; VACUUM between runs):

\`${hot_line}\`

| way | orders (transactions) a second | p50 at 80 % | p99 at 80 % |
|---|---|---|---|
| order path, group commit (ORDER_GROUP_COMMIT=64) | ${hot_group} | ${hot_g50} ms | ${hot_g99} ms |
| order path, a transaction an order (ORDER_GROUP_COMMIT=1, the path before) | ${hot_alone} | ${hot_a50} ms | ${hot_a99} ms |
| pgbench \`-c 40 -j 2\`, \`UPDATE products SET stock = stock - 1 WHERE id = 'hot' AND queue_id = 'q1' AND stock > 0\` (\`-R\` at 80 %, \`-l\` for the latencies) | ${pg_tps} | ${hot_b50} ms | ${hot_b99} ms |

Group commit / pgbench: **${hot_vs_pg}**; group commit / a transaction an
order: **${hot_vs_alone}**. Every order of a batch is stored with its outbox
row under one lock of the row and one commit, where pgbench and the path
before pay the lock and the commit once per transaction.

## 5. Redis memory per waiting user

Private redis-server, \`FLUSHALL\`, \`INFO memory\` used_memory before
(${mem0}) and after (${mem1}) writing ${memcnt} members with
\`ZADD wr:{mem}:waiting NX <seq> <user id>\` (pipelined, redis-cli --pipe;
user ids of ~15 bytes like the load generator's): **${mem_per} bytes per waiting
user**, i.e. $(calc "round(($mem1-$mem0)/1048576,1)") MiB for a million.
A waiting user has nothing else in Redis (token and status keys appear only
at admission).

## 5b. One queue of a million people

One gateway, one redis-server, no dispatcher, queue \`big\`. ${BIG_PRE} places
written into Redis (redis-cli --pipe); then \`$WRKCMD\` POST enter with fresh
users for the wrk window (**${big_e_rps} enters/s, p99 ${big_e_p99}**, into a
line of ${BIG_PRE}); then the rest written, to ${big_n}. Redis: **${big_mem_per}
bytes a person** (used_memory before the first place and after the last, over
${big_n}). Ticket polls from 100,000 people spread over the line
(\`loadgen -mint 100000 -stride $(( BIG_PRE / 100000 )) -user-prefix bm- -queue big -ticket-generation <createdAtMs>\`),
after one untimed pass: **${big_t_rps} polls/s, p99 ${big_t_p99}; ${big_cpp} Redis
commands a poll; ${big_cpu} ms of gateway CPU per 1,000 polls** (utime+stime of the
process over the run). docs/SCALING.md works out ten million from these.

## 5c. One queue split into lines

\`go test -run '^\$' -bench 'BenchmarkShardedEnter\$' -benchtime 30000x ./pkg/redisstore/\`:
a private 3-master cluster (redis-cli --cluster create), 64 concurrent
callers entering fresh users through the Store, into a queue of 1 line and
one of 3 lines. Redis CPU is each master's used_cpu_user + sys (INFO cpu)
before and after, divided by the enters.

\`\`\`
${sharded_lines}
\`\`\`

On this 2-core VM the three masters and the callers share the cores, so
enters a second barely move; what moves is the work on the busiest master
(one core in production): it is the ceiling of one queue's enters.
docs/SCALING.md projects ten million from these. The lines' key tags are
chosen so the lines are on different masters
(\`go test -run '^TestLinesAreSpreadOverTheMasters\$' -v ./pkg/redisstore/\`):
${spread_line:-not measured}.

## 5c'. Ticket polls at their pace

\`go test -count=1 -run '^TestATicketPollCostsRedisAlmostNothing\$' -v ./services/queue-gateway/internal/httpapi/\`:
1,200 people in one queue (admission 10/s, no dispatcher), the last 1,000
polling with their tickets for 12 s, each waiting the Retry-After it is
told; a hook counts every command the gateway's Redis client sends (each of
a pipeline's on its own), on one Redis and on a private 3-master cluster.

\`\`\`
${poll_lines}
\`\`\`

## 5d. Acknowledged once replicated

\`go test -run '^\$' -bench 'Benchmark(Enter|Admit)Replicated\$' -benchtime 3s ./pkg/redisstore/\`:
a private primary with one replica (deploy/local/replicated.sh) on this
machine. replicas=1 waits for the replica (REDIS_WAIT_REPLICAS=1): enters
go through the Store's group commit (the calls that come while a round is
out go in the next round, one WAIT each round); admissions are ticks of up
to 100 with a relay beside them that confirms each batch of events on the
replica before it could publish it. replicas=0 is the same without waiting
(REDIS_WAIT_REPLICAS=0, the behaviour before issue 27).

\`\`\`
${replicated_lines}
\`\`\`

## 6. Server-Sent Events

\`go test -run '^\$' -bench Streams -benchtime 1x ./services/notification-service/internal/wire/\`:

\`\`\`
${sse_line}
${sse_log}
\`\`\`
MD
} >"$W/BENCHMARKS.md"
cp "$W/BENCHMARKS.md" "$OUT"
rm -f "$W"/tokens*.txt "$W"/*.resp "$W"/*.test
say "wrote $OUT (raw output kept in $W)"

# ---------------------------------------------------------------- figures for make capacity
# docs/benchmarks.json (beside BENCHMARKS.md): the numeric figures above, by
# their names in this script, for deploy/capacity (make capacity). A figure
# not measured here (a tool missing, a run that failed) is left out, and
# make capacity names what it misses. gw_cpu_pct and gw_cpu_rps are the
# gateway's CPU (per cent of one core) and wrk's requests a second during
# the profiled position run of section 2.
JSON_OUT=${BENCH_JSON:-$(dirname "$OUT")/benchmarks.json}
gw_cpu_pct=""; gw_cpu_rps=""
if [[ -n ${t1:-} && -n ${t0:-} && -n ${hz:-} ]]; then
  gw_cpu_pct=$(calc "round(($t1 - $t0) / $hz / $PT * 100, 1)")
  gw_cpu_rps=$(awk '/Requests\/sec/ {print $2}' "$W/wrk-cpu.txt" 2>/dev/null)
fi
figs=()
for v in cores e_rps p_rps b_rps ev_rps zr_rps gw_cpu_pct gw_cpu_rps t_rps t_cpp t_front best gap \
  hot_group hot_alone pg_tps mem_per big_n big_e_rps big_mem_per big_t_rps big_cpp big_cpu \
  sse_rss sse_heap sse_stack sse_p99 draw_s sh1_eps sh1_busy sh1_cpu sh3_eps sh3_busy sh3_cpu re0 re1 ra0 ra1 \
  lead_issued lead_expected lead_err lead_inv lead_dup lead_fan_n lead_fan_p50 lead_fan_p99 lead_fan_max lead_amqp_p99 lead_notify_p99; do
  [[ $v == cores ]] && { figs+=("cores=$ncpu"); continue; }
  figs+=("$v=${!v:-}")
done
python3 - "$JSON_OUT" "measured_unix=$(date +%s)" "${figs[@]}" <<'PY'
import json, math, sys
out, figures = sys.argv[1], {}
for arg in sys.argv[2:]:
    name, _, value = arg.partition("=")
    try:
        v = float(value)
    except ValueError:
        continue  # '?', 'n/a', empty: not measured
    if math.isfinite(v):
        figures[name] = int(v) if v.is_integer() else v
with open(out, "w") as f:
    json.dump(figures, f, indent=2)
    f.write("\n")
PY
say "wrote $JSON_OUT (the figures make capacity reads)"
