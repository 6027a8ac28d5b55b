#!/usr/bin/env bash
# `make run`: every built service against the local Redis, RabbitMQ and
# PostgreSQL, dev auth on, a demo queue created. Log lines are prefixed with
# the service name. Ctrl-C stops everything; nothing is left running.
#
# Stopping: Ctrl-C (SIGINT), SIGTERM, SIGHUP (the terminal closed) or the
# script's own exit sends SIGTERM to every service, waits up to STOP_TIMEOUT
# seconds for their graceful shutdown, then kills what is left; another
# Ctrl-C meanwhile kills at once. Each service runs in a session of its own,
# so no signal but the script's reaches it, and the script knows its pid from
# the start. Its output reaches stdout through a FIFO and a prefixer that
# ignores the terminal's signals and a closed stdout: with `make run | tee
# log`, Ctrl-C kills tee first, and neither the script nor a service may die
# of that broken pipe before the stop is done.
#
# Settings (environment): BIN_DIR (default bin); the ports GATEWAY_PORT,
# ORDERS_PORT, NOTIFICATIONS_PORT (8080-8082) and GATEWAY_OPS_PORT,
# ORDERS_OPS_PORT, NOTIFICATIONS_OPS_PORT, DISPATCHER_OPS_PORT (9080-9083);
# DEMO_QUEUE (demo); STOP_TIMEOUT (20, above the services' SHUTDOWN_TIMEOUT).
# The OTEL_* variables pass through: OTEL_EXPORTER_OTLP_ENDPOINT turns
# tracing on (docs/OPERATIONS.md, Traces).
set -euo pipefail
cd "$(dirname "$0")/../.."

# What the script itself runs (make run installs them: services-up.sh).
missing=()
for tool in curl jq psql; do command -v "$tool" >/dev/null 2>&1 || missing+=("$tool"); done
if ((${#missing[@]})); then
  echo "run.sh needs ${missing[*]}: make services-up installs them (Debian: apt-get install -y curl jq postgresql-client)" >&2
  exit 1
fi

BIN_DIR=${BIN_DIR:-bin}
STOP_TIMEOUT=${STOP_TIMEOUT:-20}
DEMO_QUEUE=${DEMO_QUEUE:-demo}
# service -> API port (the dispatcher has none), ops listener's port, colour
declare -A api_port=([queue-gateway]=${GATEWAY_PORT:-8080} [order-service]=${ORDERS_PORT:-8081}
  [notification-service]=${NOTIFICATIONS_PORT:-8082})
declare -A ops_port=([queue-gateway]=${GATEWAY_OPS_PORT:-9080} [order-service]=${ORDERS_OPS_PORT:-9081}
  [notification-service]=${NOTIFICATIONS_OPS_PORT:-9082} [admission-dispatcher]=${DISPATCHER_OPS_PORT:-9083})
declare -A colour=([queue-gateway]=36 [admission-dispatcher]=33 [notification-service]=35 [order-service]=32)
page_port=${api_port[queue-gateway]}
GATEWAY=${GATEWAY:-http://127.0.0.1:$page_port}
ORDERS=${ORDERS:-http://127.0.0.1:${api_port[order-service]}}

export AUTH_DEV_MODE=true
# Entry tokens signed, so a queue that fails OPEN sells to their holders while Redis is down.
export ENTRY_TOKEN_KEYS=${ENTRY_TOKEN_KEYS:-dev-only-insecure-entry-token-key-do-not-use-in-production}
export LOG_LEVEL=${LOG_LEVEL:-info}
export REDIS_URL=${REDIS_URL:-redis://127.0.0.1:6379/0}
export AMQP_URL=${AMQP_URL:-amqp://guest:guest@127.0.0.1:5672/}
export DATABASE_URL=${DATABASE_URL:-postgres://postgres@127.0.0.1:5432/waitingroom?sslmode=disable}
# Local runs come from one address: the per-IP enter limit would only get in the way.
export ENTER_RATE_LIMIT_PER_IP=${ENTER_RATE_LIMIT_PER_IP:-0}
# The page, served by the gateway, calls the order- and notification-services.
export ORDER_SERVICE_PUBLIC_URL=${ORDER_SERVICE_PUBLIC_URL:-http://localhost:${api_port[order-service]}}
export NOTIFICATION_SERVICE_PUBLIC_URL=${NOTIFICATION_SERVICE_PUBLIC_URL:-http://localhost:${api_port[notification-service]}}
export CORS_ALLOWED_ORIGINS=${CORS_ALLOWED_ORIGINS:-http://localhost:$page_port,http://127.0.0.1:$page_port}
# Web Push ("your turn" with the page closed): a VAPID pair made once on this
# machine and kept in tmp/vapid.env (git ignores tmp/; a browser's
# subscription is bound to the key, so it stays). Chrome, Firefox and Edge
# on this machine then get the turn from their push services, which the
# notification-service reaches over the internet. Without openssl, push is off.
vapid_env=tmp/vapid.env
if [[ -z ${PUSH_VAPID_PUBLIC_KEY:-} && ! -s $vapid_env ]] && command -v openssl >/dev/null 2>&1; then
  mkdir -p tmp
  pem=$(openssl ecparam -name prime256v1 -genkey -noout)
  b64url() { base64 -w0 | tr '+/' '-_' | tr -d '='; }
  {
    echo "PUSH_VAPID_PRIVATE_KEY=$(openssl ec -outform DER 2>/dev/null <<<"$pem" | tail -c +8 | head -c 32 | b64url)"
    echo "PUSH_VAPID_PUBLIC_KEY=$(openssl ec -pubout -outform DER 2>/dev/null <<<"$pem" | tail -c 65 | b64url)"
  } >"$vapid_env"
  chmod 600 "$vapid_env"
fi
if [[ -z ${PUSH_VAPID_PUBLIC_KEY:-} && -s $vapid_env ]]; then
  set -a
  # shellcheck source=/dev/null
  . "$vapid_env"
  set +a
  export PUSH_SUBJECT=${PUSH_SUBJECT:-mailto:dev@localhost.invalid}
fi

# A write to a gone reader fails instead of killing the script: SIGPIPE is
# caught (a caught signal is reset in children, so they keep the default).
trap : PIPE
# note writes its lines to stderr, the terminal even under `| tee log`.
note() { printf '%s\n' "$@" >&2 2>/dev/null || true; }

services=()
for s in queue-gateway admission-dispatcher notification-service order-service; do
  [[ -x $BIN_DIR/$s ]] && services+=("$s")
done
if ((${#services[@]} == 0)); then
  note "no service binaries in $BIN_DIR/: run make build"
  exit 1
fi
for s in "${services[@]}"; do
  for port in ${api_port[$s]:-} ${ops_port[$s]}; do
    if (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then
      note "port $port is taken: is another $s (or make run) still running?"
      exit 1
    fi
  done
done

# The order-service needs its database.
if [[ -x $BIN_DIR/order-service ]]; then
  db=${DATABASE_URL##*/}; db=${db%%\?*}
  psql "${DATABASE_URL%/*}/postgres" -tAc "SELECT 1 FROM pg_database WHERE datname = '$db'" | grep -q 1 ||
    psql "${DATABASE_URL%/*}/postgres" -qc "CREATE DATABASE \"$db\""
fi

pids=()          # the services', in start order
declare -A name  # pid -> service
fifos=           # the directory of their output FIFOs
stopping= hurry= spawning= pending=

# stop ends every service: SIGTERM to its process group, up to STOP_TIMEOUT
# seconds for all to exit, then SIGKILL; it reports each exit status, waits
# for the prefixers (they end with their service's output) and exits with
# code (default: the status the script was exiting with).
stop() {
  local code=$? p st left
  (($#)) && code=$1
  stopping=1
  trap - EXIT
  set +e
  if ((${#pids[@]})); then
    note "" "stopping: ${services[*]} (another Ctrl-C kills them now)"
    # The group, unless the service is still on its way to setsid.
    for p in "${pids[@]}"; do kill -TERM -- "-$p" 2>/dev/null || kill -TERM "$p" 2>/dev/null; done
    local deadline=$((SECONDS + STOP_TIMEOUT))
    while [[ -z $hurry ]] && ((SECONDS < deadline)); do
      # We are inside the first signal's trap, which bash does not run
      # again for a second one until it returns: a second Ctrl-C shows as
      # the child it interrupts (the terminal signals the whole group),
      # the sleep or, on a busy machine, the subshell that lists the
      # services left.
      left=$(running) || { hurry=1; break; }
      [[ -n $left ]] || break
      sleep 0.1 || hurry=1
    done
    left=$(running)
    if [[ -n $left ]]; then
      for p in $left; do
        note "killing ${name[$p]}"
        kill -KILL -- "-$p" 2>/dev/null || kill -KILL "$p" 2>/dev/null
      done
    fi
    for p in "${pids[@]}"; do
      # wait returns early when a signal comes in; the process is gone once kill -0 fails.
      while :; do
        wait "$p" 2>/dev/null; st=$?
        kill -0 "$p" 2>/dev/null || break
      done
      note "${name[$p]} exited with status $st"
    done
    wait
  fi
  [[ -z $fifos ]] || rm -rf "$fifos"
  note "stopped"
  exit "$code"
}

# running lists the services still alive.
running() {
  local p
  for p in "${pids[@]}"; do
    if kill -0 "$p" 2>/dev/null; then printf '%s\n' "$p"; fi
  done
}

# on_signal stops with 128+signal. While services are being started it only
# remembers the signal, so no service starts unrecorded; while stopping it
# makes stop kill now.
on_signal() {
  if [[ -n $stopping ]]; then hurry=1
  elif [[ -n $spawning ]]; then pending=$1
  else stop "$1"; fi
}
trap 'on_signal 130' INT
trap 'on_signal 143' TERM
trap 'on_signal 129' HUP
trap stop EXIT
fifos=$(mktemp -d)

# prefix copies a service's output to stdout, each line led by the service's
# name. It outlives Ctrl-C and a gone stdout (then it drains the rest
# unprinted): the service must never write into a closed pipe, and its
# output ends, ending this, when stop has ended the service.
prefix() {
  trap '' INT TERM HUP PIPE
  local line
  while IFS= read -r line || [[ -n $line ]]; do
    printf '\033[%sm%-21s|\033[0m %s\n' "$2" "$1" "$line" 2>/dev/null || break
  done
  exec cat >/dev/null
}

spawning=1
for s in "${services[@]}"; do
  mkfifo "$fifos/$s"
  prefix "$s" "${colour[$s]}" <"$fifos/$s" &
  addrs=("OPS_ADDR=:${ops_port[$s]}")
  [[ -n ${api_port[$s]:-} ]] && addrs+=("HTTP_ADDR=:${api_port[$s]}")
  # setsid: a session (and process group) of its own, so the terminal's
  # Ctrl-C reaches the service only through stop(). A background job of a
  # script is never a group leader, so setsid execs in place: $! is the
  # service.
  env "${addrs[@]}" setsid "$BIN_DIR/$s" >"$fifos/$s" 2>&1 </dev/null &
  pids+=("$!")
  name[$!]=$s
done
spawning=
[[ -z $pending ]] || stop "$pending"

# Wait for the gateway, then create the demo queue with a dev admin token.
for _ in $(seq 1 100); do
  curl -fsS "$GATEWAY/readyz" >/dev/null 2>&1 && break
  sleep 0.1
done
admin=$(curl -fsS -X POST "$GATEWAY/api/v1/dev/token" -H 'Content-Type: application/json' \
  -d '{"userId":"demo-admin","role":"admin"}' | jq -r .token)
curl -fsS -X PUT "$GATEWAY/admin/v1/queues/$DEMO_QUEUE" -H "Authorization: Bearer $admin" \
  -H 'Content-Type: application/json' -d '{"state":"OPEN","admissionRatePerSec":2}' >/dev/null
if [[ -x $BIN_DIR/order-service ]]; then
  for _ in $(seq 1 100); do
    curl -fsS "$ORDERS/readyz" >/dev/null 2>&1 && break
    sleep 0.1
  done
  curl -fsS -X PUT "$ORDERS/admin/v1/products/demo-tee" -H "Authorization: Bearer $admin" \
    -H 'Content-Type: application/json' \
    -d "{\"queueId\":\"$DEMO_QUEUE\",\"name\":\"Demo tee\",\"stock\":100,\"priceCents\":2500}" >/dev/null
fi
if [[ -n ${OTEL_EXPORTER_OTLP_ENDPOINT:-}${OTEL_TRACES_EXPORTER:-} ]]; then
  traces="exported to ${OTEL_EXPORTER_OTLP_ENDPOINT:-$OTEL_TRACES_EXPORTER}; with the compose jaeger: http://localhost:16686"
else
  traces="off; docker compose up -d jaeger, then OTEL_EXPORTER_OTLP_ENDPOINT=http://localhost:4318 make run"
fi
# cat dies quietly of SIGPIPE when the reader is gone; the stack runs on.
cat <<MSG 2>/dev/null || true

  waiting room is up: ${services[*]}
  the page:    http://localhost:$page_port/
  traces:      $traces
  metrics:     http://localhost:${ops_port[queue-gateway]}/metrics (gateway), ${ops_port[order-service]} (orders), ${ops_port[notification-service]} (notifications), ${ops_port[admission-dispatcher]} (dispatcher)
  demo queue:  $GATEWAY/api/v1/queues/$DEMO_QUEUE
  dev token:   curl -X POST $GATEWAY/api/v1/dev/token -H 'Content-Type: application/json' -d '{"userId":"u1"}'
  enter:       curl -X POST -H "Authorization: Bearer <token>" $GATEWAY/api/v1/queues/$DEMO_QUEUE/enter
  position:    curl -H "Authorization: Bearer <token>" $GATEWAY/api/v1/queues/$DEMO_QUEUE/position
  order:       curl -X POST $ORDERS/api/v1/orders -H "Authorization: Bearer <token>" -H "X-Entry-Token: <entry token>" \\
                 -H 'Content-Type: application/json' -d '{"queueId":"$DEMO_QUEUE","productId":"demo-tee","quantity":1}'
  Ctrl-C stops everything.

MSG
# Until a signal, or until every service has exited by itself.
wait "${pids[@]}"
