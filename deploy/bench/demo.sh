#!/usr/bin/env bash
# `make demo`: start the stack (make run) in the background, create the queue
# "loadtest" (175 admissions/s) and the product "loadtest-tee" (stock 1000),
# run the load generator with 2000 users, print its report, stop the stack.
# Env: USERS (2000), RATE (175), STOCK (1000), QUEUE (loadtest).
set -euo pipefail
cd "$(dirname "$0")/../.."
USERS=${USERS:-2000} RATE=${RATE:-175} STOCK=${STOCK:-1000} QUEUE=${QUEUE:-loadtest}
GATEWAY=http://127.0.0.1:8080 ORDERS=http://127.0.0.1:8081
log=$(mktemp /tmp/waitingroom-demo.XXXXXX.log)

go build -o bin/loadgen ./deploy/loadgen/cmd/loadgen
make --no-print-directory build services-up >/dev/null
echo "starting the stack (logs: $log)"
setsid deploy/local/run.sh >"$log" 2>&1 &
runpid=$!
stop() {
  trap - INT TERM EXIT
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
# A fresh line: drop an old one, then create it with the rate.
curl -fsS -X DELETE "$GATEWAY/admin/v1/queues/$QUEUE" -H "Authorization: Bearer $admin" >/dev/null 2>&1 || true
curl -fsS -X PUT "$GATEWAY/admin/v1/queues/$QUEUE" -H "Authorization: Bearer $admin" -H 'Content-Type: application/json' \
  -d "{\"state\":\"OPEN\",\"admissionRatePerSec\":$RATE,\"maxQueueSize\":1000000}" >/dev/null
curl -fsS -X PUT "$ORDERS/admin/v1/products/$QUEUE-tee" -H "Authorization: Bearer $admin" -H 'Content-Type: application/json' \
  -d "{\"queueId\":\"$QUEUE\",\"name\":\"Load test tee\",\"stock\":$STOCK,\"priceCents\":100}" >/dev/null
echo "queue $QUEUE at $RATE/s, product $QUEUE-tee with stock $STOCK; $USERS users"
bin/loadgen -gateway "$GATEWAY" -orders "$ORDERS" -queue "$QUEUE" -product "$QUEUE-tee" -users "$USERS" "$@"
