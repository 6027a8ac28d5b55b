#!/usr/bin/env bash
# Replicated servers on private ports, for the failover tests and drills and
# for trying the services against them by hand: a Redis Sentinel set, a
# Redis Cluster with replicas and a 3-node RabbitMQ cluster. Nothing here
# touches the machine's own servers (6379, 5672, epmd 4369).
#
#   replicated.sh sentinel up DIR [PRIMARY [REPLICAS [SENTINELS [VIA]]]]
#       a primary, replicas and sentinels (quorum 2, down-after 1000 ms)
#       monitoring master "wr"; prints REDIS_URL for the services. REPLICAS
#       and SENTINELS are comma lists of ports (default two replicas, three
#       sentinels; SENTINELS "none": a primary and replicas alone, nothing
#       to fail over behind a test's back, and no REDIS_URL); VIA, a comma list of HOST:PORT per replica (empty: the
#       primary), points a replica at a proxy in between, to make it lag or
#       cut it off. With SENTINEL_USERS=1 everyone logs in (the default
#       user is off; password: the user's name): on the Redis nodes the
#       sentinels as "sentinel", the replicas as "replica", the services as
#       "svc"; on the sentinels the sentinels as "peer", the services as
#       "svc" and a queue-gateway as "gateway" (REDIS_URL carries svc's;
#       give a gateway gateway:gateway@ for the sentinels). So a test can
#       shut a door to one kind of client alone (ACL SETUSER <user> off,
#       CLIENT KILL USER <user>): a node's to its sentinels and replicas,
#       the sentinels' to the gateway, while everyone else still gets in.
#   replicated.sh redis-cluster up DIR [PORTS [REPLICAS [ANNOUNCE]]]
#       a Redis Cluster: PORTS a comma list (default 26410-26415), the first
#       third (or half, ...) masters, REPLICAS replicas each (default 1);
#       prints REDIS_URL (the masters as seeds). ANNOUNCE, a comma list of
#       ports aligned with PORTS (empty: none), makes a node announce
#       another port: a proxy in front of it, through which its replicas
#       (and clients) reach it.
#   replicated.sh rabbitmq up DIR [BASEPORT]      (deploy/local/cluster/rabbitmq.sh: three nodes on
#       BASEPORT..BASEPORT+30, default 61420; also kill|start DIR N, ctl DIR N ARGS)
#   replicated.sh all up DIR                       all three, default ports
#   replicated.sh KIND down DIR                    kill every process of DIR
#   replicated.sh KIND status DIR
#
# Every process writes DIR/<name>.pid; `down` kills them by PID, so a test
# that fails still leaves nothing running. Default ports: sentinel set
# 26400-26405, Redis Cluster 26410-26415 (bus ports + 10000), RabbitMQ see
# its script.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"

die() { echo "replicated.sh: $*" >&2; exit 1; }
need() { command -v "$1" >/dev/null 2>&1 || die "$1 is not installed: apt-get install -y $2"; }

# wait_until TRIES PAUSE CHECK [ARGS...]: run CHECK until it succeeds, at
# most TRIES times PAUSE seconds apart; fails when it never did.
wait_until() {
  local tries="$1" pause="$2"
  shift 2
  for _ in $(seq 1 "$tries"); do
    "$@" && return 0
    sleep "$pause"
  done
  return 1
}

# cli PORT ARGS...: redis-cli on a node or sentinel (as user svc with
# SENTINEL_USERS=1).
cli() {
  local p="$1"
  shift
  if [ "${SENTINEL_USERS:-}" = 1 ]; then
    redis-cli -p "$p" --user svc --pass svc --no-auth-warning "$@"
  else
    redis-cli -p "$p" "$@"
  fi
}

pongs() { [ "$(cli "$1" ping 2>/dev/null)" = PONG ]; }

# streaming PORT: the replica on PORT has its link to the primary up.
streaming() { [[ "$(cli "$1" info replication 2>/dev/null | tr -d '\r')" == *"master_link_status:up"* ]]; }

# wait_ping PORT: until redis on PORT answers PONG (10 s).
wait_ping() {
  wait_until 200 0.05 pongs "$1" || die "redis on port $1 did not answer within 10 s (log: $dir/redis-$1.log)"
}

# sentinels_ready REPLICAS SENTINEL...: every sentinel knows that many
# replicas and the other sentinels.
sentinels_ready() {
  local want="$1" s info
  shift
  for s in "$@"; do
    info="$(cli "$s" sentinel master wr 2>/dev/null | tr '\n' ' ')"
    [[ "$info" == *"num-slaves $want "* && "$info" == *"num-other-sentinels $(( $# - 1 )) "* ]] || return 1
  done
}

# cluster_ready PORT...: every node sees the whole cluster ok, and every
# replica is in sync with its master.
cluster_ready() {
  local p info
  for p in "$@"; do
    info="$(redis-cli -p "$p" cluster info 2>/dev/null)"
    [[ "$info" == *"cluster_state:ok"* && "$info" == *"cluster_known_nodes:$#"* ]] || return 1
    info="$(redis-cli -p "$p" info replication 2>/dev/null | tr -d '\r')"
    if [[ "$info" == *"role:slave"* && "$info" != *"master_link_status:up"* ]]; then return 1; fi
  done
}

# redis_node DIR PORT [ARGS...]: a redis-server without persistence.
redis_node() {
  local d="$1" p="$2"
  shift 2
  redis-server --port "$p" --bind 127.0.0.1 --save "" --appendonly no \
    --daemonize yes --pidfile "$d/redis-$p.pid" --logfile "$d/redis-$p.log" \
    --dir "$d" --repl-diskless-sync yes --repl-diskless-sync-delay 0 "$@"
}

sentinel_up() {
  need redis-server redis-server
  local primary="${1:-26400}" replicas="${2:-26401,26402}" sentinels="${3:-26403,26404,26405}" via="${4:-}"
  local users=()
  if [ "${SENTINEL_USERS:-}" = 1 ]; then
    users=(--user sentinel on '>sentinel' '~*' '&*' '+@all' --user replica on '>replica' '~*' '&*' '+@all'
      --user svc on '>svc' '~*' '&*' '+@all' --user default off --masteruser replica --masterauth replica)
  fi
  local rs ss vs
  IFS=, read -r -a rs <<<"$replicas"
  [ "$sentinels" = none ] && sentinels=""
  IFS=, read -r -a ss <<<"$sentinels"
  IFS=, read -r -a vs <<<"$via"
  redis_node "$dir" "$primary" "${users[@]}"
  wait_ping "$primary"
  local i r s
  for i in "${!rs[@]}"; do
    r="${rs[$i]}"
    local to="${vs[$i]:-}"
    [ -n "$to" ] || to="127.0.0.1:$primary"
    redis_node "$dir" "$r" --replicaof "${to%:*}" "${to##*:}" --replica-announce-ip 127.0.0.1 --replica-announce-port "$r" "${users[@]}"
    wait_ping "$r"
  done
  for i in "${!ss[@]}"; do
    s="${ss[$i]}"
    cat >"$dir/sentinel-$s.conf" <<EOF
port $s
bind 127.0.0.1
daemonize yes
pidfile $dir/sentinel-$s.pid
logfile $dir/sentinel-$s.log
dir $dir
sentinel monitor wr 127.0.0.1 $primary 2
sentinel down-after-milliseconds wr 1000
sentinel failover-timeout wr 5000
sentinel parallel-syncs wr 1
EOF
    if [ "${SENTINEL_USERS:-}" = 1 ]; then
      cat >>"$dir/sentinel-$s.conf" <<EOF
sentinel auth-user wr sentinel
sentinel auth-pass wr sentinel
sentinel sentinel-user peer
sentinel sentinel-pass peer
user default off
user peer on >peer ~* &* +@all
user svc on >svc ~* &* +@all
user gateway on >gateway ~* &* +@all
EOF
    fi
    redis-server "$dir/sentinel-$s.conf" --sentinel
  done
  if [ "${#ss[@]}" = 0 ]; then
    # No sentinels: the replicas only have to stream.
    for r in "${rs[@]}"; do
      wait_until 200 0.05 streaming "$r" || die "replica $r did not stream from the primary within 10 s (log: $dir/redis-$r.log)"
    done
    return
  fi
  for s in "${ss[@]}"; do wait_ping "$s"; done
  # Until the sentinels know the replicas and each other, a failover could
  # not happen: wait for both (10 s).
  wait_until 200 0.05 sentinels_ready "${#rs[@]}" "${ss[@]}" ||
    die "the sentinels did not find the replicas and each other within 10 s (logs in $dir)"
  local urls=() login="" creds=""
  for s in "${ss[@]}"; do urls+=("127.0.0.1:$s"); done
  if [ "${SENTINEL_USERS:-}" = 1 ]; then login="svc:svc@" creds="?username=svc&password=svc"; fi
  echo "REDIS_URL=redis+sentinel://$login$(IFS=,; echo "${urls[*]}")/wr$creds"
}

redis_cluster_up() {
  need redis-server redis-server
  local ports="${1:-26410,26411,26412,26413,26414,26415}" per="${2:-1}" announce="${3:-}"
  local ps as
  IFS=, read -r -a ps <<<"$ports"
  IFS=, read -r -a as <<<"$announce"
  [ $(( ${#ps[@]} % (per + 1) )) = 0 ] || die "redis-cluster: ${#ps[@]} ports do not make masters with $per replicas each"
  local i p addrs=() seeds=()
  for i in "${!ps[@]}"; do
    p="${ps[$i]}"
    local extra=()
    # A node announced at another port (a proxy in front of it) keeps its
    # own bus port.
    [ -z "${as[$i]:-}" ] || extra=(--cluster-announce-ip 127.0.0.1 --cluster-announce-port "${as[$i]}" --cluster-announce-bus-port $((p + 10000)))
    redis_node "$dir" "$p" --cluster-enabled yes --cluster-config-file "$dir/nodes-$p.conf" \
      --cluster-node-timeout 1000 --cluster-replica-validity-factor 0 --cluster-port $((p + 10000)) "${extra[@]}"
  done
  for p in "${ps[@]}"; do wait_ping "$p"; addrs+=("127.0.0.1:$p"); done
  redis-cli --cluster create "${addrs[@]}" --cluster-replicas "$per" --cluster-yes >"$dir/create.log" 2>&1 ||
    die "redis-cli --cluster create failed: $(tail -5 "$dir/create.log")"
  wait_until 200 0.1 cluster_ready "${ps[@]}" ||
    die "the cluster did not reach cluster_state:ok with every replica in sync within 20 s"
  local masters=$(( ${#ps[@]} / (per + 1) ))
  for p in "${ps[@]:0:$masters}"; do seeds+=("127.0.0.1:$p"); done
  echo "REDIS_URL=$(IFS=,; echo "${seeds[*]}")"
}

down() {
  local f
  shopt -s nullglob
  for f in "$dir"/*.pid; do
    kill -9 "$(cat "$f")" 2>/dev/null || true
    rm -f "$f"
  done
}

status() {
  local f
  shopt -s nullglob
  for f in "$dir"/*.pid; do
    local pid
    pid="$(cat "$f")"
    if kill -0 "$pid" 2>/dev/null; then echo "$(basename "$f" .pid) up pid=$pid"; else echo "$(basename "$f" .pid) down"; fi
  done
}

kind="${1:-}"
cmd="${2:-}"
dir="${3:-}"
[ -n "$kind" ] && [ -n "$cmd" ] && [ -n "$dir" ] || die "usage: replicated.sh sentinel|redis-cluster|rabbitmq|all up|down|status DIR [ports...]"
shift 3
mkdir -p "$dir"
dir="$(cd "$dir" && pwd)"

case "$kind/$cmd" in
  sentinel/up) sentinel_up "$@" ;;
  redis-cluster/up) redis_cluster_up "$@" ;;
  rabbitmq/*) exec "$here/cluster/rabbitmq.sh" "$cmd" "$dir" "$@" ;;
  all/up)
    sentinel_up
    mkdir -p "$dir/cluster" "$dir/rabbitmq"
    dir="$dir/cluster" redis_cluster_up
    "$here/cluster/rabbitmq.sh" up "$dir/rabbitmq"
    ;;
  all/down)
    down
    dir="$dir/cluster" down
    "$here/cluster/rabbitmq.sh" down "$dir/rabbitmq"
    ;;
  */down) down ;;
  */status) status ;;
  *) die "unknown: $kind $cmd" ;;
esac
