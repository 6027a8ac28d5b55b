#!/usr/bin/env bash
# `make demo`: start the stack (make run) in the background, create the queue
# "loadtest" (175 admissions/s) and the product "loadtest-tee" (stock 1000),
# run the load generator with 2000 users, print its report, and check the
# order-service's sale report of those minutes against it; then the ETA
# drill: 1,000 users entering over 10 s a queue admitting 20/s, three in ten
# leaving at a random moment of the wait they were told, and the report's
# ETA line; stop the stack.
# Env: USERS (2000), RATE (175), STOCK (1000), QUEUE (loadtest); ETA_USERS
# (1000), ETA_RATE (20), LEAVE (0.3) for the drill (ETA_USERS=0 skips it).
set -euo pipefail
cd "$(dirname "$0")/../.."
USERS=${USERS:-2000} RATE=${RATE:-175} STOCK=${STOCK:-1000} QUEUE=${QUEUE:-loadtest}
ETA_USERS=${ETA_USERS:-1000} ETA_RATE=${ETA_RATE:-20} LEAVE=${LEAVE:-0.3}
GATEWAY=http://127.0.0.1:8080 ORDERS=http://127.0.0.1:8081
log=$(mktemp /tmp/waitingroom-demo.XXXXXX.log)

go build -o bin/loadgen ./deploy/loadgen/cmd/loadgen
make --no-print-directory build services-up >/dev/null
echo "starting the stack (logs: $log)"
setsid deploy/local/run.sh >"$log" 2>&1 &
runpid=$!
# warnings prints the services' WARN and ERROR lines by message: a healthy
# demo has none but AUTH_DEV_MODE's notices, which make run sets on purpose.
warnings() {
  local n
  n=$(grep -E '"level":"(WARN|ERROR)"' "$log" | grep -vc 'AUTH_DEV_MODE is on' || true)
  echo "warnings and errors in the services' logs: $n (besides the AUTH_DEV_MODE notices)"
  # With none, grep finds nothing: not a failure of the demo (pipefail and
  # set -e would otherwise end this trap before the stack is stopped).
  { grep -E '"level":"(WARN|ERROR)"' "$log" | grep -v 'AUTH_DEV_MODE is on' |
    sed -E 's/.*"level":"([A-Z]+)".*"msg":"([^"]*)".*/  \1 \2/' | sort | uniq -c | sort -rn | head -10; } || true
}
stop() {
  trap - INT TERM EXIT
  warnings
  echo "stopping the stack"
  kill -TERM -- "-$runpid" 2>/dev/null || kill -TERM "$runpid" 2>/dev/null || true
  for _ in $(seq 1 200); do kill -0 "$runpid" 2>/dev/null || break; sleep 0.1; done
}
trap stop INT TERM EXIT
for _ in $(seq 1 300); do
  grep -q 'waiting room is up' "$log" 2>/dev/null && break
  kill -0 "$runpid" 2>/dev/null || { cat "$log"; echo "make run failed" >&2; exit 1; }
  sleep 0.2
done
grep -q 'waiting room is up' "$log" || { tail -20 "$log"; echo "stack did not come up" >&2; exit 1; }

admin=$(curl -fsS -X POST "$GATEWAY/api/v1/dev/token" -H 'Content-Type: application/json' \
  -d '{"userId":"loadgen-admin","role":"admin"}' | jq -r .token)
# led waits until a dispatcher leads queue $1 (its ticks make a measured
# rate), as a sale's queue is led before the sale opens: a queue created a
# moment before the crowd admits nobody until its lease is taken, a delay no
# estimate given at entry counts.
led() {
  for _ in $(seq 1 100); do
    r=$(curl -fsS "$GATEWAY/admin/v1/queues/$1" -H "Authorization: Bearer $admin" | jq -r .measuredRatePerSec)
    [ "$r" != "0" ] && [ "$r" != "null" ] && return 0
    sleep 0.1
  done
  echo "no dispatcher leads $1 after 10 s" >&2
  return 1
}
# sale makes queue $1 a fresh line admitting $2/s (an old one is dropped; the
# knobs a demo sets are all given, so none is left from an earlier run) with
# the product $1-tee of stock $3, and waits until a dispatcher leads it.
sale() {
  curl -fsS -X DELETE "$GATEWAY/admin/v1/queues/$1" -H "Authorization: Bearer $admin" >/dev/null 2>&1 || true
  curl -fsS -X PUT "$GATEWAY/admin/v1/queues/$1" -H "Authorization: Bearer $admin" -H 'Content-Type: application/json' \
    -d "{\"state\":\"OPEN\",\"admissionRatePerSec\":$2,\"maxQueueSize\":1000000,\"activationSpreadMs\":2000}" >/dev/null
  curl -fsS -X PUT "$ORDERS/admin/v1/products/$1-tee" -H "Authorization: Bearer $admin" -H 'Content-Type: application/json' \
    -d "{\"queueId\":\"$1\",\"name\":\"Demo tee\",\"stock\":$3,\"priceCents\":100}" >/dev/null
  led "$1"
}
# report checks the order-service's sale report of queue $1 over the
# minutes from $2 to now (RFC 3339) against the load generator's counts in
# its output $3: arrivals = entered, admitted = admissions, ordersCreated =
# orders created, exactly, and its CSV has a header and one row a minute.
# The last minute is sent when it ends and the orders are rolled up every
# 30 s, so it asks again for up to 90 s.
report() {
  local q=$1 from=$2 out=$3 to entered admitted created got=""
  to=$(date -u -d "@$(( ($(date +%s) / 60 + 1) * 60 ))" +%Y-%m-%dT%H:%M:%SZ)
  entered=$(awk '$1 == "enter" {print $2; exit}' "$out")
  admitted=$(awk '$1 == "admissions" {print $2; exit}' "$out")
  created=$(sed -nE 's/^orders: created ([0-9]+),.*/\1/p' "$out" | head -1)
  local want="$entered $admitted $created"
  for _ in $(seq 1 90); do
    got=$(curl -fsS "$ORDERS/admin/v1/queues/$q/report?from=$from&to=$to" -H "Authorization: Bearer $admin" |
      jq -r '"\(.totals.arrivals) \(.totals.admitted) \(.totals.ordersCreated)"') || got=""
    [ "$got" = "$want" ] && break
    sleep 1
  done
  local minutes rows
  minutes=$(( ($(date -u -d "$to" +%s) - $(date -u -d "$from" +%s)) / 60 ))
  rows=$(curl -fsS "$ORDERS/admin/v1/queues/$q/report?from=$from&to=$to&format=csv" -H "Authorization: Bearer $admin" | wc -l)
  echo "sale report of $q, $from to $to: arrivals, admitted, ordered $got (loadgen: $want); CSV $rows lines for $minutes minutes"
  if [ "$got" != "$want" ] || [ "$rows" -ne $((minutes + 1)) ]; then
    echo "the sale report does not match the sale" >&2
    return 1
  fi
}
from=$(date -u +%Y-%m-%dT%H:%M:00Z)
sale "$QUEUE" "$RATE" "$STOCK"
echo "queue $QUEUE at $RATE/s, product $QUEUE-tee with stock $STOCK; $USERS users"
out=$(mktemp /tmp/waitingroom-demo-loadgen.XXXXXX.txt)
bin/loadgen -gateway "$GATEWAY" -orders "$ORDERS" -queue "$QUEUE" -product "$QUEUE-tee" -users "$USERS" "$@" | tee "$out"
report "$QUEUE" "$from" "$out"

[ "$ETA_USERS" -gt 0 ] || exit 0
# The ETA drill: a line long enough to estimate (about 30 s of waiting at
# the end), stock for everyone, three in ten leaving.
sale "$QUEUE-eta" "$ETA_RATE" "$ETA_USERS"
echo "ETA drill: queue $QUEUE-eta at $ETA_RATE/s; $ETA_USERS users entering over 10 s, $LEAVE of them leaving"
bin/loadgen -gateway "$GATEWAY" -orders "$ORDERS" -queue "$QUEUE-eta" -product "$QUEUE-eta-tee" -users "$ETA_USERS" \
  -enter-within 10s -leave "$LEAVE" -quiet
