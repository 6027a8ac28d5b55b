#!/usr/bin/env bash
# `make images`: the four service images from deploy/Dockerfile, built with
# podman or docker (engine.sh), tagged localhost/waitingroom/<service>:dev
# (IMAGES_TAG changes dev; SERVICES picks some; DOCKERFILE, relative to the
# repository root or absolute, builds from another file: the image tests
# build their deliberately broken copies this way).
#
# Base images (IMAGES_BASES):
#   public  the Dockerfile's defaults, golang:1.26 and distroless static;
#   local   local stand-ins made by local-bases.sh (no registry needed);
#   auto    (default) public if both are present or can be pulled within
#           PULL_TIMEOUT seconds (default 60), else local.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
ENGINE="$("$here/engine.sh")"
export ENGINE
SERVICES="${SERVICES:-queue-gateway admission-dispatcher order-service notification-service}"
TAG="${IMAGES_TAG:-dev}"
BASES="${IMAGES_BASES:-auto}"
DOCKERFILE="${DOCKERFILE:-deploy/Dockerfile}"
PUBLIC=(docker.io/library/golang:1.26 gcr.io/distroless/static-debian12:nonroot)

present() {
  "$ENGINE" image inspect "$1" >/dev/null 2>&1 || timeout "${PULL_TIMEOUT:-60}" "$ENGINE" pull -q "$1" >/dev/null 2>&1
}
if [[ "$BASES" == auto ]]; then
  BASES=public
  for img in "${PUBLIC[@]}"; do
    if ! present "$img"; then
      echo "images: $img cannot be pulled; building local base images instead (deploy/images/local-bases.sh)"
      BASES=local
      break
    fi
  done
fi
args=()
case "$BASES" in
  public) ;;
  local)
    "$here/local-bases.sh"
    args=(--build-arg BUILDER_IMAGE=localhost/waitingroom/golang:local --build-arg RUNTIME_IMAGE=localhost/waitingroom/static:nonroot)
    ;;
  *) echo "images: IMAGES_BASES must be auto, public or local, not '$BASES'" >&2; exit 2 ;;
esac
# podman's builds reach the network (the module proxy) through the host's:
# a machine like CI's has no container networking.
# podman 4.3 sets neither TARGETOS nor TARGETARCH (BuildKit does): name
# this machine's, which the Dockerfile cross-compiles for.
if [[ "$ENGINE" == podman ]]; then
  args+=(--network host
    --build-arg TARGETOS="$(podman info --format '{{.Host.OS}}')"
    --build-arg TARGETARCH="$(podman info --format '{{.Host.Arch}}')")
fi

cd "$root"
for s in $SERVICES; do
  start=$SECONDS
  echo "images: localhost/waitingroom/$s:$TAG ($ENGINE, $BASES bases)"
  "$ENGINE" build -q -f "$DOCKERFILE" --build-arg SERVICE="$s" "${args[@]}" -t "localhost/waitingroom/$s:$TAG" . >/dev/null
  size="$("$ENGINE" image inspect --format '{{.Size}}' "localhost/waitingroom/$s:$TAG")"
  echo "images: localhost/waitingroom/$s:$TAG built in $((SECONDS - start)) s, $((size / 1024)) KiB"
done
