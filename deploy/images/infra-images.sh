#!/usr/bin/env bash
# The compose test's stand-ins for docker-compose.yml's redis, rabbitmq and
# postgres images, on a machine with no registry in reach: Debian's packages
# on the local Debian base (local-bases.sh), tagged
# localhost/waitingroom/<name>:compose-test. docker-compose.yml keeps the
# public images; only the test maps them to these.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
ENGINE="$("$here/engine.sh")"
export ENGINE
"$here/local-bases.sh"
net=()
[[ "$ENGINE" == podman ]] && net=(--network host)
for name in redis rabbitmq postgres; do
  img="localhost/waitingroom/$name:compose-test"
  start=$SECONDS
  "$ENGINE" build -q "${net[@]}" -f "$here/infra/$name.Containerfile" -t "$img" "$here/infra" >/dev/null
  echo "infra-images: $img in $((SECONDS - start)) s"
done
