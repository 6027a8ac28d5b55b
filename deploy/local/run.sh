#!/usr/bin/env bash
# `make run`: every built service against the local Redis, RabbitMQ and
# PostgreSQL, dev auth on, a demo queue created. Log lines are prefixed with
# the service name. Ctrl-C stops everything; nothing is left running.
set -euo pipefail
cd "$(dirname "$0")/../.."

export AUTH_DEV_MODE=true
export LOG_LEVEL=${LOG_LEVEL:-info}
export REDIS_URL=${REDIS_URL:-redis://127.0.0.1:6379/0}
export AMQP_URL=${AMQP_URL:-amqp://guest:guest@127.0.0.1:5672/}
export DATABASE_URL=${DATABASE_URL:-postgres://postgres@127.0.0.1:5432/waitingroom?sslmode=disable}
# Local runs come from one address: the per-IP enter limit would only get in the way.
export ENTER_RATE_LIMIT_PER_IP=${ENTER_RATE_LIMIT_PER_IP:-0}

GATEWAY=${GATEWAY:-http://127.0.0.1:8080}
ORDERS=${ORDERS:-http://127.0.0.1:8081}
DEMO_QUEUE=${DEMO_QUEUE:-demo}

# service name -> colour
declare -A colour=([queue-gateway]=36 [admission-dispatcher]=33 [notification-service]=35 [order-service]=32)
services=()
for s in queue-gateway admission-dispatcher notification-service order-service; do
  [[ -x bin/$s ]] && services+=("$s")
done
if ((${#services[@]} == 0)); then
  echo "no service binaries in bin/: run make build" >&2
  exit 1
fi

# The order-service needs its database.
if [[ -x bin/order-service ]]; then
  db=${DATABASE_URL##*/}; db=${db%%\?*}
  psql "${DATABASE_URL%/*}/postgres" -tAc "SELECT 1 FROM pg_database WHERE datname = '$db'" | grep -q 1 ||
    psql "${DATABASE_URL%/*}/postgres" -qc "CREATE DATABASE \"$db\""
fi

pids=()
stop() {
  trap - INT TERM EXIT
  echo
  echo "stopping: ${services[*]}"
  for p in "${pids[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
  for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
  echo "stopped"
}
trap stop INT TERM EXIT

for s in "${services[@]}"; do
  # The API port (none for the dispatcher) and the ops listener's (OPS_ADDR).
  case $s in
    queue-gateway) ports="8080 9080" ;; order-service) ports="8081 9081" ;;
    notification-service) ports="8082 9082" ;; admission-dispatcher) ports="9083" ;;
  esac
  for port in $ports; do
    if (exec 3<>/dev/tcp/127.0.0.1/$port) 2>/dev/null; then
      echo "port $port is taken: is another $s (or make run) still running?" >&2
      exit 1
    fi
  done
  c=${colour[$s]}
  # setsid: the service gets its own process group, so Ctrl-C reaches it only
  # through stop(), which waits for its graceful shutdown.
  setsid "bin/$s" > >(while IFS= read -r line; do printf '\033[%sm%-21s|\033[0m %s\n' "$c" "$s" "$line"; done) 2>&1 &
  pids+=($!)
done

# Wait for the gateway, then create the demo queue with a dev admin token.
for _ in $(seq 1 100); do
  curl -fsS "$GATEWAY/readyz" >/dev/null 2>&1 && break
  sleep 0.1
done
admin=$(curl -fsS -X POST "$GATEWAY/api/v1/dev/token" -H 'Content-Type: application/json' \
  -d '{"userId":"demo-admin","role":"admin"}' | jq -r .token)
curl -fsS -X PUT "$GATEWAY/admin/v1/queues/$DEMO_QUEUE" -H "Authorization: Bearer $admin" \
  -H 'Content-Type: application/json' -d '{"state":"OPEN","admissionRatePerSec":2}' >/dev/null
if [[ -x bin/order-service ]]; then
  for _ in $(seq 1 100); do
    curl -fsS "$ORDERS/readyz" >/dev/null 2>&1 && break
    sleep 0.1
  done
  curl -fsS -X PUT "$ORDERS/admin/v1/products/demo-tee" -H "Authorization: Bearer $admin" \
    -H 'Content-Type: application/json' \
    -d "{\"queueId\":\"$DEMO_QUEUE\",\"name\":\"Demo tee\",\"stock\":100,\"priceCents\":2500}" >/dev/null
fi
cat <<MSG

  waiting room is up: ${services[*]}
  the page:    http://localhost:8080/
  metrics:     http://localhost:9080/metrics (gateway), 9081 (orders), 9082 (notifications), 9083 (dispatcher)
  demo queue:  $GATEWAY/api/v1/queues/$DEMO_QUEUE
  dev token:   curl -X POST $GATEWAY/api/v1/dev/token -H 'Content-Type: application/json' -d '{"userId":"u1"}'
  enter:       curl -X POST -H "Authorization: Bearer <token>" $GATEWAY/api/v1/queues/$DEMO_QUEUE/enter
  position:    curl -H "Authorization: Bearer <token>" $GATEWAY/api/v1/queues/$DEMO_QUEUE/position
  order:       curl -X POST $ORDERS/api/v1/orders -H "Authorization: Bearer <token>" -H "X-Entry-Token: <entry token>" \
                 -H 'Content-Type: application/json' -d '{"queueId":"$DEMO_QUEUE","productId":"demo-tee","quantity":1}'
  Ctrl-C stops everything.

MSG
wait "${pids[@]}"
