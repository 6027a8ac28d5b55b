#!/usr/bin/env bash
# Make sure the local Redis, RabbitMQ and PostgreSQL answer: start each one that
# is installed and stopped, after checking the tools deploy/local/run.sh uses
# (curl, jq, psql). With --tests, also what the tests use: Debian's Chromium
# (the browser test), npm with the page audit's pinned axe-core
# (deploy/e2e/a11y, npm ci from its lock) and iproute2 (the partition
# drills); with --fonts, the CJK fonts make screenshots draws with; with --bench, what
# make bench drives the load with (wrk) and Chromium with npm for its
# Lighthouse run of the waiting page. With --install,
# apt-get installs what is missing (as root, or through sudo); without it,
# or where apt-get cannot, each missing piece is named with its package and
# we fail. make run and make test call it with --install.
set -euo pipefail

install=false tests=false bench=false fonts=false
for arg in "$@"; do
  case $arg in
    --install) install=true ;;
    --tests) tests=true ;;
    --bench) bench=true ;;
    --fonts) fonts=true ;;
    *) echo "usage: $0 [--install] [--tests] [--bench] [--fonts]" >&2; exit 2 ;;
  esac
done

sudo_() { if [[ $(id -u) -eq 0 ]]; then "$@"; else sudo -n "$@"; fi; }
# The servers' tools live in sbin, which a user's PATH may lack (SBIN
# names those folders; its test sets it empty).
SBIN=${SBIN-/usr/local/sbin:/usr/sbin:/sbin}
[[ -z $SBIN ]] || export PATH=$PATH:$SBIN
# The servers' ports (their tests move them).
REDIS_PORT=${REDIS_PORT:-6379} AMQP_PORT=${AMQP_PORT:-5672} PG_PORT=${PG_PORT:-5432}

# answers <port>: a server listens on 127.0.0.1:<port>.
answers() { (: </dev/tcp/127.0.0.1/"$1") 2>/dev/null; }

apt_updated=false
need() { # need <command> <debian package>
  command -v "$1" >/dev/null 2>&1 && return 0
  if ! $install; then
    echo "missing: $1 (install it: apt-get install -y $2)" >&2
    return 1
  fi
  if ! command -v apt-get >/dev/null 2>&1; then
    echo "missing: $1 (package $2 on Debian; this machine has no apt-get: install it with its own package manager)" >&2
    return 1
  fi
  if ! $apt_updated; then
    sudo_ env DEBIAN_FRONTEND=noninteractive apt-get update -qq || {
      echo "missing: $1: apt-get update failed (not root and no password-less sudo?): apt-get install -y $2" >&2
      return 1
    }
    apt_updated=true
  fi
  echo "installing $2 (for $1)"
  sudo_ env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$2" >/dev/null || {
    echo "missing: $1: could not install $2: apt-get install -y $2" >&2
    return 1
  }
}

wait_for() { # wait_for <name> <seconds> <command...>
  local name=$1 secs=$2; shift 2
  for ((i = 0; i < secs * 5; i++)); do
    if "$@" >/dev/null 2>&1; then echo "$name: up"; return 0; fi
    sleep 0.2
  done
  echo "$name: did not come up within ${secs}s" >&2
  return 1
}

# A server that answers on its port needs nothing installed or started
# (it may be another user's, or in a container).
missing=0
answers "$REDIS_PORT" || need redis-server redis-server || missing=1
need redis-cli redis-tools || missing=1
answers "$AMQP_PORT" || need rabbitmq-server rabbitmq-server || missing=1
answers "$PG_PORT" || need pg_ctlcluster postgresql || missing=1
need psql postgresql-client || missing=1
need curl curl || missing=1
need jq jq || missing=1
if $tests; then
  need chromium chromium || missing=1
  need ip iproute2 || missing=1
  need npm npm || missing=1
fi
if $bench; then
  need wrk wrk || missing=1
  # The waiting page's first load: Lighthouse (npm) in Debian's Chromium.
  need chromium chromium || missing=1
  need npm npm || missing=1
fi
# --fonts: glyphs for Chinese, Japanese and Korean (make screenshots draws
# the page in Japanese; without them Chromium draws boxes).
if $fonts; then
  if ! need fc-list fontconfig; then
    missing=1
  elif ! fc-list | grep -qi 'Noto Sans CJK'; then
    if $install && command -v apt-get >/dev/null 2>&1; then
      echo "installing fonts-noto-cjk (for the screenshots in Japanese)"
      sudo_ env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq fonts-noto-cjk >/dev/null || {
        echo "missing: fonts-noto-cjk (install it: apt-get install -y fonts-noto-cjk)" >&2; missing=1
      }
    else
      echo "missing: fonts-noto-cjk (install it: apt-get install -y fonts-noto-cjk)" >&2; missing=1
    fi
  fi
fi
((missing == 0)) || exit 1

# Redis: in memory only, as the tests expect (a restart loses everything).
if ! redis-cli -h 127.0.0.1 -p "$REDIS_PORT" ping >/dev/null 2>&1; then
  echo "redis: starting"
  mkdir -p /var/lib/redis /var/log/redis 2>/dev/null || true
  redis-server --daemonize yes --bind 127.0.0.1 -::1 --port "$REDIS_PORT" --save "" --appendonly no \
    --dir /var/lib/redis --logfile /var/log/redis/ci.log
fi
wait_for redis 15 redis-cli -h 127.0.0.1 -p "$REDIS_PORT" ping

# PostgreSQL: the distribution's cluster, trust auth on 127.0.0.1.
if ! pg_isready -h 127.0.0.1 -p "$PG_PORT" -q; then
  echo "postgres: starting"
  ver=$(ls /etc/postgresql | sort -V | tail -n 1)
  if [[ -z "$ver" ]]; then
    echo "postgres: no cluster under /etc/postgresql" >&2; exit 1
  fi
  hba=/etc/postgresql/$ver/main/pg_hba.conf
  if ! grep -q '^host all all 127.0.0.1/32 trust' "$hba"; then
    sudo_ sed -i '1i host all all 127.0.0.1/32 trust\nhost all all ::1/128 trust\nlocal all all trust' "$hba"
  fi
  sudo_ pg_ctlcluster --skip-systemctl-redirect "$ver" main start
fi
wait_for postgres 30 pg_isready -h 127.0.0.1 -p "$PG_PORT" -q

# RabbitMQ: the default guest user, loopback only. Debian's
# rabbitmq-diagnostics refuses anyone but root and rabbitmq: the port tells.
if ! answers "$AMQP_PORT"; then
  echo "rabbitmq: starting"
  sudo_ rabbitmq-server -detached >/dev/null 2>&1 || true
fi
wait_for rabbitmq 90 answers "$AMQP_PORT"

# The browser test's accessibility audit: axe-core as its lock pins it.
if $tests; then
  a11y=$(cd "$(dirname "$0")/../e2e/a11y" && pwd)
  if [[ ! $a11y/node_modules/.package-lock.json -nt $a11y/package-lock.json ]]; then
    echo "a11y: npm ci (axe-core) in $a11y"
    (cd "$a11y" && npm ci --no-audit --no-fund --silent) || {
      echo "a11y: npm ci failed in $a11y: the browser test's audit needs axe-core from the npm registry" >&2; exit 1
    }
  fi
fi
