#!/usr/bin/env bash
# make lighthouse: the waiting page's Lighthouse scores, first load, in
# Debian's Chromium: a queue-gateway built from this tree on free ports
# against a private redis-server of its own (dev auth on; nothing is left
# in the machine's Redis), the page of a paused queue.
# Lighthouse as deploy/lighthouse's lock pins it (npm ci on first use).
# Fails unless accessibility is 100 and performance at least
# LIGHTHOUSE_MIN_PERFORMANCE (default 95); FORM_FACTOR mobile (default,
# Lighthouse's simulated slow 4G and 4x slower CPU) or desktop. The JSON
# report is kept in $OUT (default /tmp/lighthouse).
set -euo pipefail
cd "$(dirname "$0")/../.."
root=$PWD
min_perf=${LIGHTHOUSE_MIN_PERFORMANCE:-95}
form=${FORM_FACTOR:-mobile}
out=${OUT:-/tmp/lighthouse}
mkdir -p "$out"

lh=$root/deploy/lighthouse
if [[ ! $lh/node_modules/.package-lock.json -nt $lh/package-lock.json ]]; then
  echo "lighthouse: npm ci in $lh"
  (cd "$lh" && npm ci --no-audit --no-fund --silent)
fi
[[ -x /usr/bin/chromium ]] || { echo "lighthouse: needs Debian's chromium: apt-get install -y chromium" >&2; exit 1; }

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
port=$(free_port) ops=$(free_port) rport=$(free_port)
bin=$(mktemp -d)
trap 'kill "${gw:-}" "${rs:-}" 2>/dev/null || true; wait 2>/dev/null || true; rm -rf "$bin"' EXIT
redis-server --bind 127.0.0.1 --port "$rport" --save "" --appendonly no --dir "$bin" >"$out/redis.log" 2>&1 &
rs=$!
go build -o "$bin/queue-gateway" ./services/queue-gateway
HTTP_ADDR=127.0.0.1:$port OPS_ADDR=127.0.0.1:$ops REDIS_URL=redis://127.0.0.1:$rport/0 \
  AUTH_DEV_MODE=true LOG_LEVEL=warn "$bin/queue-gateway" >"$out/gateway.log" 2>&1 &
gw=$!
for ((i = 0; i < 100; i++)); do curl -fs "http://127.0.0.1:$port/readyz" >/dev/null && break; sleep 0.1; done

q=lighthouse-$$
tok=$(curl -fsS -X POST -H 'Content-Type: application/json' -d '{"userId":"ops","role":"admin"}' "http://127.0.0.1:$port/api/v1/dev/token" | jq -r .token)
curl -fsS -o /dev/null -X PUT -H "Authorization: Bearer $tok" -H 'Content-Type: application/json' \
  -d '{"state":"PAUSED"}' "http://127.0.0.1:$port/admin/v1/queues/$q"

preset=()
[[ $form == desktop ]] && preset=(--preset=desktop)
CHROME_PATH=/usr/bin/chromium "$lh/node_modules/.bin/lighthouse" "http://127.0.0.1:$port/q/$q" \
  --quiet --output=json --output-path="$out/report.json" --only-categories=performance,accessibility "${preset[@]}" \
  --chrome-flags="--headless=new --no-sandbox --disable-gpu --disable-quic --no-first-run --disable-background-networking --disable-component-update --disable-sync"
curl -fsS -o /dev/null -X DELETE -H "Authorization: Bearer $tok" "http://127.0.0.1:$port/admin/v1/queues/$q" || true

read -r perf a11y fcp lcp tbt cls bytes < <(jq -r '[(.categories.performance.score*100|round), (.categories.accessibility.score*100|round),
  .audits["first-contentful-paint"].displayValue, .audits["largest-contentful-paint"].displayValue,
  .audits["total-blocking-time"].displayValue, .audits["cumulative-layout-shift"].displayValue,
  .audits["total-byte-weight"].numericValue] | map(tostring | gsub(" "; "")) | join(" ")' "$out/report.json")
third=$(jq -r --arg h "127.0.0.1:$port" '[.audits["network-requests"].details.items[].url | select((startswith("http://" + $h) or startswith("data:")) | not)] | length' "$out/report.json")
echo "lighthouse ($form): performance $perf, accessibility $a11y; FCP $fcp, LCP $lcp, TBT $tbt, CLS $cls; $bytes bytes transferred, $third requests to other hosts; report $out/report.json"
fail=0
(( a11y == 100 )) || { echo "lighthouse: accessibility $a11y, want 100" >&2; fail=1; }
(( perf >= min_perf )) || { echo "lighthouse: performance $perf, want at least $min_perf" >&2; fail=1; }
(( third == 0 )) || { echo "lighthouse: $third requests to other hosts" >&2; fail=1; }
exit $fail
