#!/usr/bin/env bash
# A private three-node RabbitMQ cluster for the tests and make chaos, on
# ports of its own: it never touches the machine's RabbitMQ (5672) or its
# epmd (4369), and writes nothing outside DIR (the processes run in DIR,
# crash dumps go to DIR/nodeN).
#
#   rabbitmq.sh up DIR [BASEPORT] start three nodes, join them into one cluster
#                                 and print AMQP_URL=<the three URLs, comma-separated>;
#                                 BASEPORT defaults to 61420 (61420..61450)
#   rabbitmq.sh down DIR          SIGKILL every node, the epmd and the watchdog
#   rabbitmq.sh kill DIR N        SIGKILL node N (1, 2 or 3): a crash
#   rabbitmq.sh start DIR N       start node N again; returns once it serves AMQP
#   rabbitmq.sh status DIR        per node: name, AMQP port, pid, up or down; then AMQP_URL=...
#   rabbitmq.sh ctl DIR N ARGS..  rabbitmqctl against node N, e.g. ctl DIR 1 list_queues name leader
#
# Ports, all on 127.0.0.1: BASEPORT+N-1 is node N's AMQP port,
# BASEPORT+10+N-1 its Erlang distribution, BASEPORT+20 the cluster's own
# epmd (ERL_EPMD_PORT), BASEPORT+21..BASEPORT+30 the distribution of
# rabbitmqctl. Everything else lives under DIR: the Erlang cookie (DIR/home,
# mode 400), one rabbitmq.conf, an empty plugin list (no management plugin),
# and per node DIR/nodeN/{mnesia,log,server.out} and DIR/nodeN.pid (the
# node's process group). The machine's /etc/rabbitmq files are not read.
#
# With RABBIT_CLUSTER_WATCH_PID=<pid>, up also leaves a watchdog that takes
# the cluster down once that process is gone (a test binary killed by its
# timeout runs no cleanup).
#
# The binaries come from RABBIT_CLUSTER_BIN, else /usr/lib/rabbitmq/bin
# (the Debian package; its /usr/sbin wrappers switch to the rabbitmq user),
# else the directory of rabbitmq-server on PATH. Sourced, this file only
# defines rabbitmq_cluster CMD ARGS...; run, it runs it.

rabbitmq_cluster() {
	local cmd=${1:-}
	shift || true
	case $cmd in
	up) _rc_up "$@" ;;
	down)
		# Nothing was started there: nothing to stop.
		[ -n "${1:-}" ] && [ ! -f "$1/cluster.env" ] && return 0
		_rc_load "${1:-}" && _rc_down
		;;
	kill) _rc_load "${1:-}" && _rc_node_arg "${2:-}" && _rc_kill "$2" ;;
	start) _rc_load "${1:-}" && _rc_node_arg "${2:-}" && _rc_start_node "$2" && _rc_wait_node "$2" ;;
	status) _rc_load "${1:-}" && _rc_status ;;
	ctl) _rc_load "${1:-}" && _rc_node_arg "${2:-}" && { local n=$2; shift 2; _rc_ctl "$n" "$@"; } ;;
	*)
		echo "usage: rabbitmq.sh up DIR [BASEPORT] | down DIR | kill DIR N | start DIR N | status DIR | ctl DIR N ARGS..." >&2
		return 2
		;;
	esac
}

_RC_NODES=3
_RC_SELF=$(realpath "${BASH_SOURCE[0]}")

_rc_bin() {
	local d
	for d in "${RABBIT_CLUSTER_BIN:-}" /usr/lib/rabbitmq/bin "$(dirname "$(command -v rabbitmq-server 2>/dev/null || echo /nonexistent/x)")"; do
		if [ -n "$d" ] && [ -x "$d/rabbitmq-server" ] && [ -x "$d/rabbitmqctl" ]; then
			echo "$d"
			return 0
		fi
	done
	echo "rabbitmq.sh: rabbitmq-server not found. Install RabbitMQ 3.10 or later with Erlang/OTP 25:" \
		"apt-get install -y rabbitmq-server (then systemctl disable --now rabbitmq-server if the machine's own node is not wanted)," \
		"or set RABBIT_CLUSTER_BIN to the sbin directory of a generic-unix release" >&2
	return 127
}

_rc_node_arg() {
	case ${1:-} in
	1 | 2 | 3) return 0 ;;
	esac
	echo "rabbitmq.sh: node number must be 1, 2 or 3, not '${1:-}'" >&2
	return 2
}

# _rc_load DIR: the cluster's base port and binaries, written by up.
_rc_load() {
	_RC_DIR=${1:-}
	if [ -z "$_RC_DIR" ] || [ ! -f "$_RC_DIR/cluster.env" ]; then
		echo "rabbitmq.sh: no cluster in '${_RC_DIR}' (run up first)" >&2
		return 2
	fi
	_RC_DIR=$(realpath "$_RC_DIR")
	# shellcheck disable=SC1091
	. "$_RC_DIR/cluster.env"
	_RC_BASE=$BASEPORT
	_RC_BIN=$RABBIT_BIN
}

_rc_name() { echo "wr${_RC_BASE}n$1@localhost"; }
_rc_port() { echo $((_RC_BASE + $1 - 1)); }
_rc_url() { echo "amqp://guest:guest@127.0.0.1:$(_rc_port "$1")/"; }

_rc_urls() {
	local n urls=()
	for n in $(seq 1 $_RC_NODES); do urls+=("$(_rc_url "$n")"); done
	(
		IFS=,
		echo "AMQP_URL=${urls[*]}"
	)
}

# _rc_env N: node N's environment in _RC_ENV, for env -i: nothing of the
# caller's (no RABBITMQ_* or ERL_* variable of the machine) leaks in.
_rc_env() {
	local n=$1
	_RC_ENV=(PATH="$PATH" LANG=C.UTF-8 LC_ALL=C.UTF-8 HOME="$_RC_DIR/home"
		ERL_EPMD_PORT=$((_RC_BASE + 20)) ERL_EPMD_ADDRESS=127.0.0.1
		ERL_FLAGS='-kernel inet_dist_use_interface {127,0,0,1}'
		RABBITMQ_CONF_ENV_FILE="$_RC_DIR/rabbitmq-env.conf"
		RABBITMQ_CONFIG_FILE="$_RC_DIR/rabbitmq.conf"
		RABBITMQ_ADVANCED_CONFIG_FILE="$_RC_DIR/advanced.config"
		RABBITMQ_ENABLED_PLUGINS_FILE="$_RC_DIR/enabled_plugins"
		RABBITMQ_NODENAME="$(_rc_name "$n")" RABBITMQ_USE_LONGNAME=false
		RABBITMQ_NODE_IP_ADDRESS=127.0.0.1 RABBITMQ_NODE_PORT="$(_rc_port "$n")"
		RABBITMQ_DIST_PORT=$((_RC_BASE + 10 + n - 1))
		RABBITMQ_CTL_DIST_PORT_MIN=$((_RC_BASE + 21)) RABBITMQ_CTL_DIST_PORT_MAX=$((_RC_BASE + 30))
		RABBITMQ_MNESIA_BASE="$_RC_DIR/node$n/mnesia" RABBITMQ_LOG_BASE="$_RC_DIR/node$n/log"
		ERL_CRASH_DUMP="$_RC_DIR/node$n/erl_crash.dump")
}

# _rc_spawn N NAME CMD...: CMD in node N's environment, in the background,
# as the leader of a new process group whose pid goes to DIR/NAME.pid, so
# that one kill reaches the whole group (for a node: the sh wrapper, beam,
# erl_child_setup). The subshell has no job control, so the background
# command is not a group leader already and setsid does not fork.
_rc_spawn() {
	local n=$1 name=$2 out=$3
	shift 3
	_rc_env "$n"
	(
		set +m
		cd "$_RC_DIR" # nothing of Erlang's lands in the caller's directory
		env -i "${_RC_ENV[@]}" setsid "$@" >>"$out" 2>&1 </dev/null &
		echo $! >"$_RC_DIR/$name.pid"
	)
}

_rc_ctl() {
	local n=$1
	shift
	_rc_env "$n"
	(cd "$_RC_DIR" && env -i "${_RC_ENV[@]}" "$_RC_BIN/rabbitmqctl" -n "$(_rc_name "$n")" "$@")
}

# _rc_alive PID: the process exists and is not a zombie waiting for its
# (possibly absent) reaper.
_rc_alive() {
	local state
	[ -n "${1:-}" ] && [ -r "/proc/$1/stat" ] || return 1
	state=$(sed -e 's/^.*) //' "/proc/$1/stat" 2>/dev/null | cut -d' ' -f1)
	[ -n "$state" ] && [ "$state" != Z ]
}

_rc_pid() { cat "$_RC_DIR/$1.pid" 2>/dev/null || true; }

# _rc_killgroup NAME: SIGKILL the process group whose leader's pid is in
# DIR/NAME.pid, wait until its leader is gone, forget it.
_rc_killgroup() {
	local pid i
	pid=$(_rc_pid "$1")
	[ -n "$pid" ] || return 0
	kill -KILL -- "-$pid" 2>/dev/null || kill -KILL "$pid" 2>/dev/null || true
	for i in $(seq 1 100); do
		_rc_alive "$pid" || break
		sleep 0.1
	done
	rm -f "$_RC_DIR/$1.pid"
	if _rc_alive "$pid"; then
		echo "rabbitmq.sh: $1 (pid $pid) still alive 10 s after SIGKILL" >&2
		return 1
	fi
}

_rc_port_open() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

_rc_start_node() {
	local n=$1 d
	d="$_RC_DIR/node$n"
	if _rc_alive "$(_rc_pid "node$n")"; then
		echo "rabbitmq.sh: node $n is running (pid $(_rc_pid "node$n"))" >&2
		return 1
	fi
	mkdir -p "$d/mnesia" "$d/log"
	_rc_spawn "$n" "node$n" "$d/server.out" "$_RC_BIN/rabbitmq-server"
}

# _rc_wait_node N: until node N accepts AMQP connections (its listener
# opens last in the boot), 120 s at most.
_rc_wait_node() {
	local n=$1 port pid i
	port=$(_rc_port "$n")
	pid=$(_rc_pid "node$n")
	for i in $(seq 1 1200); do
		if _rc_port_open "$port"; then
			return 0
		fi
		if ! _rc_alive "$pid"; then
			echo "rabbitmq.sh: node $n exited while starting; end of $_RC_DIR/node$n/server.out:" >&2
			tail -n 40 "$_RC_DIR/node$n/server.out" >&2
			return 1
		fi
		sleep 0.1
	done
	echo "rabbitmq.sh: node $n not serving AMQP on $port within 120 s; end of its log:" >&2
	tail -n 40 "$_RC_DIR/node$n/server.out" >&2
	return 1
}

# _RC_DEFAULT_BASE is up's base port when none is given: above the
# kernel's ephemeral ports (32768-60999 by default) and the range the tests'
# testenv.FreePort draws from (20000 up to them), so no outgoing connection
# or other test takes one of its ports meanwhile.
_RC_DEFAULT_BASE=61420

_rc_up() {
	local dir=${1:-} base=${2:-$_RC_DEFAULT_BASE} n p
	if [ -z "$dir" ] || [ $# -gt 2 ] || ! [[ $base =~ ^[0-9]+$ ]] || [ "$base" -lt 1024 ] || [ "$base" -gt 65500 ]; then
		echo "usage: rabbitmq.sh up DIR [BASEPORT] (one base port, default $_RC_DEFAULT_BASE; BASEPORT..BASEPORT+30 must be free)" >&2
		return 2
	fi
	_RC_BIN=$(_rc_bin) || return
	mkdir -p "$dir" || return
	_RC_DIR=$(realpath "$dir")
	if [ -f "$_RC_DIR/cluster.env" ]; then
		_rc_load "$_RC_DIR" || return
		for p in node1 node2 node3 epmd; do
			if _rc_alive "$(_rc_pid "$p")"; then
				echo "rabbitmq.sh: a cluster is running in $_RC_DIR (run down first)" >&2
				return 1
			fi
		done
		rm -rf "$_RC_DIR"/node* "$_RC_DIR/home"
	fi
	_RC_BASE=$base
	for p in $(seq "$base" $((base + 30))); do
		if _rc_port_open "$p"; then
			echo "rabbitmq.sh: port $p is taken; pick another BASEPORT" >&2
			return 1
		fi
	done
	printf 'BASEPORT=%s\nRABBIT_BIN=%q\n' "$base" "$_RC_BIN" >"$_RC_DIR/cluster.env"
	mkdir -p "$_RC_DIR/home"
	rm -f "$_RC_DIR/home/.erlang.cookie"
	head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n' >"$_RC_DIR/home/.erlang.cookie"
	chmod 400 "$_RC_DIR/home/.erlang.cookie"
	echo '[].' >"$_RC_DIR/enabled_plugins"
	echo '# empty: the machine'"'"'s /etc/rabbitmq/rabbitmq-env.conf is not read' >"$_RC_DIR/rabbitmq-env.conf"
	cat >"$_RC_DIR/rabbitmq.conf" <<-'EOF'
		# The cluster docs/OPERATIONS.md ("The RabbitMQ cluster this expects") describes.
		cluster_partition_handling = pause_minority
		queue_leader_locator = balanced
		log.file.level = info
		log.console = false
	EOF

	local t0=$SECONDS
	# The cluster's own epmd, in the foreground of a process group we own,
	# started first so that no node starts a daemonized one.
	_rc_spawn 1 epmd "$_RC_DIR/epmd.out" epmd -port $((base + 20)) -address 127.0.0.1
	for p in $(seq 1 50); do
		_rc_port_open $((base + 20)) && break
		sleep 0.1
	done
	if [ -n "${RABBIT_CLUSTER_WATCH_PID:-}" ]; then
		_rc_spawn 1 watch /dev/null bash -c 'while kill -0 "$1" 2>/dev/null; do sleep 1; done; exec "$2" down "$3"' \
			watchdog "$RABBIT_CLUSTER_WATCH_PID" "$_RC_SELF" "$_RC_DIR"
	fi
	for n in $(seq 1 $_RC_NODES); do _rc_start_node "$n" || { _rc_down; return 1; }; done
	for n in $(seq 1 $_RC_NODES); do _rc_wait_node "$n" || { _rc_down; return 1; }; done
	echo "rabbitmq.sh: three nodes up after $((SECONDS - t0)) s; joining" >&2
	# Nodes 2 and 3 join node 1: stop_app both, join one after the other
	# (both change node 1's schema), start_app both.
	local pids=()
	for n in 2 3; do
		_rc_ctl "$n" stop_app >"$_RC_DIR/node$n/join.out" 2>&1 &
		pids+=($!)
	done
	for p in "${pids[@]}"; do wait "$p" || { cat "$_RC_DIR"/node*/join.out >&2; _rc_down; return 1; }; done
	for n in 2 3; do
		_rc_ctl "$n" join_cluster "$(_rc_name 1)" >>"$_RC_DIR/node$n/join.out" 2>&1 || { cat "$_RC_DIR/node$n/join.out" >&2; _rc_down; return 1; }
	done
	pids=()
	for n in 2 3; do
		_rc_ctl "$n" start_app >>"$_RC_DIR/node$n/join.out" 2>&1 &
		pids+=($!)
	done
	for p in "${pids[@]}"; do wait "$p" || { cat "$_RC_DIR"/node*/join.out >&2; _rc_down; return 1; }; done
	for n in 2 3; do _rc_wait_node "$n" || { _rc_down; return 1; }; done
	local running
	running=$(_rc_ctl 1 eval 'length(rabbit_nodes:all_running()).' 2>&1 || true)
	if [ "$running" != 3 ]; then
		echo "rabbitmq.sh: node 1 sees '$running' running nodes, want 3" >&2
		_rc_down
		return 1
	fi
	echo "rabbitmq.sh: cluster of 3 up in $((SECONDS - t0)) s under $_RC_DIR" >&2
	_rc_urls
}

_rc_kill() {
	local pid
	pid=$(_rc_pid "node$1")
	if ! _rc_alive "$pid"; then
		echo "rabbitmq.sh: node $1 is not running" >&2
		return 1
	fi
	_rc_killgroup "node$1" && echo "rabbitmq.sh: node $1 ($(_rc_name "$1"), pid $pid) killed" >&2
}

_rc_down() {
	local n rc=0 w
	w=$(_rc_pid watch)
	# The watchdog runs down itself: it must not kill its own process.
	if [ -n "$w" ] && [ "$w" != "$$" ]; then _rc_killgroup watch || rc=1; fi
	rm -f "$_RC_DIR/watch.pid"
	for n in $(seq 1 $_RC_NODES); do _rc_killgroup "node$n" || rc=1; done
	_rc_killgroup epmd || rc=1
	return $rc
}

_rc_status() {
	local n pid state
	for n in $(seq 1 $_RC_NODES); do
		pid=$(_rc_pid "node$n")
		state=down
		if _rc_alive "$pid"; then
			state=starting
			_rc_port_open "$(_rc_port "$n")" && state=up
		fi
		echo "node $n $(_rc_name "$n") amqp=127.0.0.1:$(_rc_port "$n") pid=${pid:--} $state"
	done
	_rc_urls
}

if [ "${BASH_SOURCE[0]}" = "$0" ]; then
	set -u
	rabbitmq_cluster "$@"
fi
