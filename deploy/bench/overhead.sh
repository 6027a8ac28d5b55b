#!/usr/bin/env bash
# deploy/bench/overhead.sh: what a change costs the queue-gateway's position
# polls, measured against an older revision on this machine.
#
#   deploy/bench/overhead.sh            # BASE=36cd7a8 (before tracing) against the working tree
#   BASE=<rev> deploy/bench/overhead.sh # or: deploy/bench/overhead.sh <rev>
#   NEW=<rev> ...                       # a revision instead of the working tree
#                                       # (NEW=BASE: an A/A run, the harness's own noise)
#
# Builds the queue-gateway of BASE (in a git worktree under /tmp, removed
# once built) and of the working tree, starts both (dev auth,
# ENTER_RATE_LIMIT_PER_IP=0 and the per-user and per-address limits off,
# LOG_LEVEL=error, no OTEL_* variable: tracing
# off) on free ports against the local Redis (127.0.0.1:6379, database
# OVERHEAD_REDIS_DB, default 9: tests use 15 and `make run` 0) and a queue of
# its own (ovh<pid>, a line of OVERHEAD_LINE people written straight into
# Redis, no dispatcher), then runs wrk in interleaved pairs, base and new one
# after the other, for two kinds of polls:
#   ticket    GET position with a JWT and an X-Queue-Ticket (the fast path:
#             answered from the gateway's frontier, no gin, no Redis)
#   noticket  GET position with a JWT only (gin, the middleware chain and
#             one EVALSHA to Redis)
# It prints every run's requests/s and the gateway's CPU per request (utime +
# stime from /proc over the run), the median ratio new/base per kind, and
# exits 1 if a median ratio of requests/s is below OVERHEAD_MIN_RATIO (0.97:
# an overhead of 3 % or more), 2 if it could not measure.
#
# Against this 2-core machine's noise: the pairs alternate which binary runs
# first (base-new, new-base, ...; OVERHEAD_ORDER=fixed: base first every
# time), and the gateways are restarted between OVERHEAD_ROUNDS rounds (2),
# started in the other order each round. In A/A runs (NEW=36cd7a8, the same
# binary twice) the medians were 0.970 / 0.963 (ticket / noticket) with base
# first in every pair and one pair of processes, 0.985 / 0.996 alternating,
# 1.014 / 1.014 alternating over 2 rounds: a median is good to about 2 %
# here, so a run near the 0.97 line says little alone; run it again.
#
# Knobs: OVERHEAD_PAIRS (10 a kind, over all rounds), OVERHEAD_ROUNDS (2),
# OVERHEAD_DURATION (5s a run), OVERHEAD_CONNS (64), OVERHEAD_THREADS (2),
# OVERHEAD_LINE (50000), OVERHEAD_REDIS (127.0.0.1:6379), OVERHEAD_REDIS_DB
# (9), OVERHEAD_MIN_RATIO (0.97), OVERHEAD_PROFILE=1 (after the pairs, CPU
# profiles of each binary under each kind, 2 x OVERHEAD_PROFILE_SECONDS (10)
# each, merged: top functions, the tracing code's, GC and allocation),
# OVERHEAD_KEEP=1 (keep the work directory: wrk outputs, logs, profiles).
# Needs go, wrk (apt-get install wrk; installed here when missing and root),
# redis-cli, curl, jq, python3. Everything it starts is stopped by PID on
# exit; its Redis keys and the worktree are removed.
set -uo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(git -C "$HERE" rev-parse --show-toplevel) || exit 2
cd "$ROOT" || exit 2

BASE=${1:-${BASE:-36cd7a8}}
PAIRS=${OVERHEAD_PAIRS:-10}
ROUNDS=${OVERHEAD_ROUNDS:-2}
ORDER=${OVERHEAD_ORDER:-abba}
DUR=${OVERHEAD_DURATION:-5s}
CONNS=${OVERHEAD_CONNS:-64}
THREADS=${OVERHEAD_THREADS:-2}
NLINE=${OVERHEAD_LINE:-50000}
MIN_RATIO=${OVERHEAD_MIN_RATIO:-0.97}
REDIS_ADDR=${OVERHEAD_REDIS:-127.0.0.1:6379}
REDIS_DB=${OVERHEAD_REDIS_DB:-9}
RHOST=${REDIS_ADDR%:*}; RPORT=${REDIS_ADDR##*:}
RC=(redis-cli -h "$RHOST" -p "$RPORT" -n "$REDIS_DB")
Q=ovh$$
KINDS=(ticket noticket)

say() { echo "overhead: $*" >&2; }
die() { say "$*"; exit 2; }
have() { command -v "$1" >/dev/null 2>&1; }
freeport() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
py() { python3 -c "$1"; }
median() { python3 -c "import statistics,sys; print(f'{statistics.median(map(float, sys.argv[1:])):.4f}')" "$@"; }

(( ROUNDS >= 1 && PAIRS >= ROUNDS )) || die "OVERHEAD_PAIRS ($PAIRS) must be at least OVERHEAD_ROUNDS ($ROUNDS)"
# Tracing off: no OTEL_* variable reaches either gateway.
while read -r v; do unset "$v"; done < <(compgen -e | grep '^OTEL_' || true)

if ! have wrk; then
  if [[ $(id -u) == 0 ]] && have apt-get; then
    say "wrk missing: apt-get install wrk"
    apt-get install -y wrk >/dev/null 2>&1 || { apt-get update >/dev/null 2>&1 && apt-get install -y wrk >/dev/null 2>&1; }
  fi
  have wrk || die "wrk is missing (Debian: apt-get install wrk)"
fi
for t in go redis-cli curl jq python3 git; do have "$t" || die "$t is missing"; done
"${RC[@]}" ping >/dev/null 2>&1 || die "no Redis at $REDIS_ADDR (start one: redis-server --port $RPORT --save '' --appendonly no)"
BASE_SHA=$(git rev-parse --verify --quiet "$BASE^{commit}") || die "unknown revision $BASE"

W=$(mktemp -d /tmp/wr-overhead.XXXXXX)
pids=()
wts=()
stop_gateways() {
  for p in "${pids[@]}"; do kill -TERM "$p" 2>/dev/null; done
  for p in "${pids[@]}"; do
    for _ in $(seq 30); do kill -0 "$p" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$p" 2>/dev/null; wait "$p" 2>/dev/null
  done
  pids=()
}
cleanup() {
  local rc=$?
  stop_gateways
  # The queue's keys (wr:{ovhPID}:...) and its registration.
  "${RC[@]}" SREM wr:queues "$Q" >/dev/null 2>&1
  "${RC[@]}" --scan --pattern "wr:{$Q}*" 2>/dev/null | xargs -r -n 500 "${RC[@]}" DEL >/dev/null 2>&1
  "${RC[@]}" --scan --pattern "wr:{$Q:*" 2>/dev/null | xargs -r -n 500 "${RC[@]}" DEL >/dev/null 2>&1
  for wt in "${wts[@]}"; do
    [[ -d $wt ]] && git -C "$ROOT" worktree remove --force "$wt" >/dev/null 2>&1
  done
  [[ ${#wts[@]} -gt 0 ]] && git -C "$ROOT" worktree prune >/dev/null 2>&1
  if [[ ${OVERHEAD_KEEP:-0} == 1 ]]; then say "work directory kept: $W"; else rm -rf "$W"; fi
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# ---------------------------------------------------------------- build
mkdir -p "$W/bin"
# build_rev REV NAME: the queue-gateway of REV, built in a worktree $W/NAME
# that is removed again at once (the binary is all that is needed of it).
build_rev() {
  wts+=("$W/$2")
  git worktree add --detach "$W/$2" "$1" >"$W/worktree-$2.log" 2>&1 || { cat "$W/worktree-$2.log" >&2; die "git worktree add $1 failed"; }
  (cd "$W/$2" && CGO_ENABLED=0 go build -trimpath -o "$W/bin/gateway-$2" ./services/queue-gateway) || die "build of $1 failed"
  git worktree remove --force "$W/$2" >/dev/null 2>&1
}
say "base $BASE ($BASE_SHA): building its queue-gateway in a worktree under $W"
build_rev "$BASE_SHA" base
if [[ -n ${NEW:-} ]]; then
  NEW_SHA=$(git rev-parse --verify --quiet "$NEW^{commit}") || die "unknown revision $NEW"
  NEW_REV="$NEW (${NEW_SHA:0:7})"
  say "new $NEW_REV: building its queue-gateway in a worktree"
  build_rev "$NEW_SHA" new
else
  NEW_REV="working tree at $(git rev-parse --short HEAD)$(git diff --quiet HEAD -- services/queue-gateway pkg go.work 2>/dev/null || echo ' + uncommitted changes')"
  say "new: building the queue-gateway of the $NEW_REV"
  (CGO_ENABLED=0 go build -trimpath -o "$W/bin/gateway-new" ./services/queue-gateway) || die "build of the working tree failed"
fi
go build -o "$W/bin/loadgen" ./deploy/loadgen/cmd/loadgen || die "build of loadgen failed"

# ---------------------------------------------------------------- gateways
declare -A URL OPS PID
# start_gateways FIRST SECOND: both started (FIRST first), ready.
start_gateways() {
  local g hp op
  for g in "$@"; do
    hp=$(freeport); op=$(freeport)
    URL[$g]=http://127.0.0.1:$hp; OPS[$g]=127.0.0.1:$op
    AUTH_DEV_MODE=true ENTER_RATE_LIMIT_PER_IP=0 POSITION_RATE_LIMIT_PER_USER=0 PUBLIC_RATE_LIMIT_PER_IP=0 LOG_LEVEL=error HTTP_ADDR=127.0.0.1:$hp OPS_ADDR=127.0.0.1:$op \
      PPROF_ENABLED=true REDIS_URL="redis://$REDIS_ADDR/$REDIS_DB" "$W/bin/gateway-$g" >>"$W/gateway-$g.log" 2>&1 &
    PID[$g]=$!; pids+=($!)
    sleep 0.3
  done
  for g in "$@"; do
    for _ in $(seq 100); do curl -fsS "${URL[$g]}/readyz" >/dev/null 2>&1 && break; sleep 0.1; done
    curl -fsS "${URL[$g]}/readyz" >/dev/null 2>&1 || { cat "$W/gateway-$g.log" >&2; die "gateway $g not ready"; }
  done
}
metric() { curl -fsS "http://${OPS[$1]}/metrics" 2>/dev/null | awk -v m="$2" 'index($0, m " ") == 1 && !done {print $NF; done = 1}'; }
frontier_reads() { metric "$1" 'waitingroom_gateway_position_reads_total{source="frontier"}'; }
gc_cycles() { metric "$1" go_gc_duration_seconds_count; }
heap_mib() { py "print(f'{$(metric "$1" go_memstats_heap_alloc_bytes) / 1048576:.2f}')"; }
cpu_ticks() { awk '{print $14+$15}' "/proc/${PID[$1]}/stat"; }
HZ=$(getconf CLK_TCK)

start_gateways base new
say "gateways: base ${URL[base]} (pid ${PID[base]}), new ${URL[new]} (pid ${PID[new]}); Redis $REDIS_ADDR db $REDIS_DB, queue $Q"
say "binaries: base $(( $(stat -c %s "$W/bin/gateway-base") / 1048576 )) MiB, new $(( $(stat -c %s "$W/bin/gateway-new") / 1048576 )) MiB; heap just after start: base $(heap_mib base) MiB, new $(heap_mib new) MiB"

# ---------------------------------------------------------------- the queue and its line
ADMIN=$(curl -fsS -X POST "${URL[base]}/api/v1/dev/token" -H 'Content-Type: application/json' \
  -d '{"userId":"overhead-admin","role":"admin"}' | jq -r .token)
[[ -n $ADMIN && $ADMIN != null ]] || die "no admin token"
curl -fsS -X PUT "${URL[base]}/admin/v1/queues/$Q" -H "Authorization: Bearer $ADMIN" -H 'Content-Type: application/json' \
  -d '{"state":"OPEN","admissionRatePerSec":175,"maxQueueSize":50000000,"maxWaitSeconds":604800}' >/dev/null || die "queue $Q not created"
# Places 1..N for users ovh-0..N-1, as bench.sh writes its ticket line.
"${RC[@]}" EVAL "for i = 1, tonumber(ARGV[1]) do redis.call('ZADD', KEYS[1], i, ARGV[2] .. (i - 1)) end redis.call('SET', KEYS[2], ARGV[1]) return 1" \
  2 "wr:{$Q}:waiting" "wr:{$Q}:seq" "$NLINE" ovh- >/dev/null || die "line not written"
tgen=$("${RC[@]}" HGET "wr:{$Q}:config" createdAtMs)
"$W/bin/loadgen" -mint "$NLINE" -user-prefix ovh- -queue "$Q" -ticket-generation "$tgen" >"$W/tickets.txt" || die "loadgen -mint failed"
cut -d' ' -f1 "$W/tickets.txt" >"$W/tokens.txt"
declare -A TOK=([ticket]=$W/tickets.txt [noticket]=$W/tokens.txt)
read -r JWT100 TK100 < <(sed -n 100p "$W/tickets.txt")

# run NAME GATEWAY KIND DURATION -> "rps non2xx errors cpu_us_per_request requests".
# wrk runs in the foreground of this shell (not in a subshell), so a TERM
# lets it finish its run and then cleans up.
run() {
  local out=$W/wrk-$1.txt c0 c1 rps reqs bad errs
  c0=$(cpu_ticks "$2")
  TOKENS=${TOK[$3]} METHOD=GET WRK_THREADS=$THREADS wrk -t"$THREADS" -c"$CONNS" -d"$4" -s "$HERE/tokens.lua" \
    "${URL[$2]}/api/v1/queues/$Q/position" >"$out" 2>&1
  c1=$(cpu_ticks "$2")
  rps=$(awk '/Requests\/sec/ {print $2}' "$out")
  reqs=$(awk '/requests in/ {print $1}' "$out")
  bad=$(awk '/Non-2xx/ {print $5}' "$out")
  errs=$(awk '/Socket errors/ {gsub(",", ""); print $4+$6+$8+$10}' "$out")
  echo "${rps:-0} ${bad:-0} ${errs:-0} $(py "print(f'{($c1 - $c0) / $HZ * 1e6 / max(1, ${reqs:-0}):.1f}')") ${reqs:-0}"
}

# prepare: on each gateway, one poll of each kind (200, place 100; the first
# poll with a ticket makes the gateway track the queue, its frontier within
# 100 ms), then the warm-up: one pass over every JWT with its ticket (each
# JWT verified once and cached, as for a person who polls for minutes with
# one token), then a short run without tickets (Redis connections, pools).
warm_t=$(( NLINE / 8000 + 2 ))
prepare() {
  local g a b
  for g in "$@"; do
    a=$(curl -fsS "${URL[$g]}/api/v1/queues/$Q/position" -H "Authorization: Bearer $JWT100" -H "X-Queue-Ticket: $TK100") || die "$g: ticket poll failed"
    b=$(curl -fsS "${URL[$g]}/api/v1/queues/$Q/position" -H "Authorization: Bearer $JWT100") || die "$g: poll without ticket failed"
    [[ $(jq -r .position <<<"$a") == 100 && $(jq -r .position <<<"$b") == 100 ]] || die "$g: place 100 expected: $a / $b"
  done
  sleep 0.5
  for g in "$@"; do
    say "warm-up $g: ${warm_t}s with tickets, 3s without"
    run warm-$g-ticket "$g" ticket ${warm_t}s >/dev/null
    run warm-$g-noticket "$g" noticket 3s >/dev/null
  done
}

# ---------------------------------------------------------------- interleaved pairs
WRKCMD="TOKENS=<file> METHOD=GET WRK_THREADS=$THREADS wrk -t$THREADS -c$CONNS -d$DUR -s deploy/bench/tokens.lua <gateway>/api/v1/queues/$Q/position"
echo "overhead: base $BASE (${BASE_SHA:0:7}) vs new = $NEW_REV; tracing off (no OTEL_*)"
echo "overhead: $PAIRS interleaved pairs of $DUR runs per kind over $ROUNDS round(s) of fresh gateways (started base first in odd rounds, new first in even ones); $([[ $ORDER == fixed ]] && echo 'base runs first in every pair' || echo 'base runs first in odd pairs, new first in even ones'); $CONNS connections, $THREADS threads; line of $NLINE"
echo "overhead: each run: $WRKCMD"
declare -A RATIOS CPURATIOS REQ GC FRONT TABLE
for kind in "${KINDS[@]}"; do
  RATIOS[$kind]=""; CPURATIOS[$kind]=""; TABLE[$kind]=""
  for g in base new; do REQ[$kind-$g]=0; GC[$kind-$g]=0; FRONT[$kind-$g]=0; done
done
fail=0
i=0
for round in $(seq "$ROUNDS"); do
  if (( round > 1 )); then
    stop_gateways
    if (( round % 2 == 0 )); then start_gateways new base; else start_gateways base new; fi
  fi
  if (( round % 2 == 0 )); then order=(new base); else order=(base new); fi
  say "round $round: gateways started ${order[0]} first (pids base ${PID[base]}, new ${PID[new]})"
  prepare "${order[@]}"
  # This round's share of the pairs.
  np=$(( PAIRS * round / ROUNDS - PAIRS * (round - 1) / ROUNDS ))
  i0=$i
  for kind in "${KINDS[@]}"; do
    i=$i0
    declare -A g0 f0
    for g in base new; do g0[$g]=$(gc_cycles $g); f0[$g]=$(frontier_reads $g); done
    for _ in $(seq "$np"); do
      i=$(( i + 1 ))
      if [[ $ORDER == fixed ]] || (( i % 2 == 1 )); then first=base; second=new; else first=new; second=base; fi
      declare -A RPS NB ERR CPU N
      for g in $first $second; do
        run $kind-$i-$g $g $kind "$DUR" >"$W/res"
        read -r RPS[$g] NB[$g] ERR[$g] CPU[$g] N[$g] <"$W/res"
        REQ[$kind-$g]=$(( ${REQ[$kind-$g]} + ${N[$g]} ))
      done
      if [[ ${NB[base]} != 0 || ${NB[new]} != 0 || ${ERR[base]} != 0 || ${ERR[new]} != 0 ]]; then
        say "pair $i ($kind): non-2xx base ${NB[base]} new ${NB[new]}, socket errors base ${ERR[base]} new ${ERR[new]} (see $W/wrk-$kind-$i-*.txt)"; fail=2
      fi
      r=$(py "print(f'{${RPS[new]} / ${RPS[base]}:.4f}')"); rc=$(py "print(f'{${CPU[new]} / ${CPU[base]}:.4f}')")
      RATIOS[$kind]+=" $r"; CPURATIOS[$kind]+=" $rc"
      TABLE[$kind]+=$(printf '%-9s %5s %4s %5s %12s %12s %7s %14s %14s' "$kind" "$round" "$i" "$first" "${RPS[base]}" "${RPS[new]}" "$r" "${CPU[base]}" "${CPU[new]}")$'\n'
      printf '%-9s %5s %4s %5s %12s %12s %7s %14s %14s\n' "$kind" "$round" "$i" "$first" "${RPS[base]}" "${RPS[new]}" "$r" "${CPU[base]}" "${CPU[new]}" >&2
    done
    for g in base new; do
      GC[$kind-$g]=$(py "print(${GC[$kind-$g]} + $(gc_cycles $g) - ${g0[$g]})")
      FRONT[$kind-$g]=$(py "print(int(${FRONT[$kind-$g]} + $(frontier_reads $g) - ${f0[$g]}))")
    done
  done
done

echo
for kind in "${KINDS[@]}"; do
  printf '%-9s %5s %4s %5s %12s %12s %7s %14s %14s\n' kind round pair first "base req/s" "new req/s" "ratio" "base cpu us/rq" "new cpu us/rq"
  printf '%s' "${TABLE[$kind]}"
  # shellcheck disable=SC2086
  med=$(median ${RATIOS[$kind]}); cmed=$(median ${CPURATIOS[$kind]})
  ok=$(py "print(1 if $med >= $MIN_RATIO else 0)")
  if [[ $kind == ticket ]]; then
    echo "$kind: answered from the frontier during the pairs: base ${FRONT[$kind-base]} of ${REQ[$kind-base]} polls, new ${FRONT[$kind-new]} of ${REQ[$kind-new]}"
  fi
  echo "$kind: GC cycles per 1,000 requests: base $(py "print(f'{${GC[$kind-base]} * 1000 / max(1, ${REQ[$kind-base]}):.2f}')"), new $(py "print(f'{${GC[$kind-new]} * 1000 / max(1, ${REQ[$kind-new]}):.2f}')")"
  echo "$kind: median ratio new/base req/s = $med (overhead $(py "print(f'{(1 - $med) * 100:.1f}')") %; pass at >= $MIN_RATIO: $([[ $ok == 1 ]] && echo yes || echo NO)); median ratio new/base gateway CPU per request = $cmed"
  echo
  [[ $ok == 1 || $fail == 2 ]] || fail=1
done

# ---------------------------------------------------------------- optional profiles
# OVERHEAD_PROFILE=1: per kind, CPU profiles of base, new, new, base
# (OVERHEAD_PROFILE_SECONDS each, 10 by default, under the same wrk load),
# merged per binary: the top functions, the tracing code's functions, and
# the garbage collector's and allocator's shares.
if [[ ${OVERHEAD_PROFILE:-0} == 1 ]]; then
  PS=${OVERHEAD_PROFILE_SECONDS:-10}
  for kind in "${KINDS[@]}"; do
    n=0
    for g in base new new base; do
      n=$(( n + 1 ))
      curl -fsS "http://${OPS[$g]}/debug/pprof/profile?seconds=$PS" -o "$W/cpu-$kind-$g-$n.out" & cp=$!
      run prof-$kind-$g-$n $g $kind "${PS}s" >"$W/res"; wait $cp
      read -r rps _ _ cpr _ <"$W/res"
      echo "profile $kind $g #$n: $rps req/s, $cpr us of gateway CPU a request"
    done
    for g in base new; do
      profs=("$W"/cpu-$kind-$g-*.out)
      echo "---- $g, $kind polls: pprof -top (${#profs[@]} x ${PS} s merged)"
      go tool pprof -top -nodecount 20 "$W/bin/gateway-$g" "${profs[@]}" 2>/dev/null | sed -n '/^Duration/p;/flat%/,$p'
      echo "---- $g, $kind polls: cumulative shares (GC, allocation, tracing code)"
      go tool pprof -top -cum -nodecount 100000 "$W/bin/gateway-$g" "${profs[@]}" 2>/dev/null |
        grep -E ' (runtime\.gcBgMarkWorker|runtime\.gcAssistAlloc|runtime\.mallocgc|runtime\.bgsweep)$|opentelemetry|otelgin|redisotel|pkg/telemetry|httpserver\.observe|logging\.traceHandler|fastPolls\)\.span' ||
        echo "(none sampled)"
    done
  done
fi

if [[ $fail == 2 ]]; then say "FAIL: runs had errors"; exit 2; fi
if [[ $fail == 1 ]]; then say "FAIL: a median ratio is below $MIN_RATIO"; exit 1; fi
say "ok: both median ratios >= $MIN_RATIO"
exit 0
