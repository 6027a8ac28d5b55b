#!/usr/bin/env bash
# Makes local stand-ins for the public base images on a machine that cannot
# pull them (no registry in reach), with nothing but Debian's packages and
# this machine's Go toolchain:
#
#   localhost/waitingroom/debian:bookworm  debootstrap --variant=minbase, imported
#   localhost/waitingroom/golang:local     for golang:1.26 (builder.Containerfile)
#   localhost/waitingroom/static:nonroot   for gcr.io/distroless/static-debian12:nonroot
#                                          (runtime.Containerfile)
#
# An image that exists already is kept (--rebuild makes all three again).
# Then build with
#   --build-arg BUILDER_IMAGE=localhost/waitingroom/golang:local
#   --build-arg RUNTIME_IMAGE=localhost/waitingroom/static:nonroot
# which is what `make images` does when the public images cannot be pulled.
# Needs root (debootstrap), podman or docker, debootstrap and a Debian
# mirror (DEBIAN_MIRROR, default http://deb.debian.org/debian).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
ENGINE="${ENGINE:-$("$here/engine.sh")}"
MIRROR="${DEBIAN_MIRROR:-http://deb.debian.org/debian}"
SUITE="${DEBIAN_SUITE:-bookworm}"
DEBIAN_IMAGE=localhost/waitingroom/debian:$SUITE
rebuild=0
[[ "${1:-}" == --rebuild ]] && rebuild=1

# Scratch folders, removed however the script ends.
scratch=()
trap 'rm -rf "${scratch[@]}"' EXIT

exists() { [[ $rebuild == 0 ]] && "$ENGINE" image inspect "$1" >/dev/null 2>&1; }

if ! exists "$DEBIAN_IMAGE"; then
  command -v debootstrap >/dev/null || { echo "local-bases: debootstrap is not installed (apt-get install debootstrap)" >&2; exit 1; }
  root="$(mktemp -d)"
  scratch+=("$root" "$root.log")
  # mktemp makes the folder 0700, and tar records it as the image's /: no
  # user but root could then reach a file (redis-server as redis failed to
  # load its libraries).
  chmod 0755 "$root"
  echo "local-bases: debootstrap $SUITE from $MIRROR (about two minutes)"
  debootstrap --variant=minbase "$SUITE" "$root" "$MIRROR" >"$root.log" 2>&1 || { tail -20 "$root.log" >&2; exit 1; }
  rm -rf "$root"/var/cache/apt/archives/*.deb "$root"/var/lib/apt/lists/*
  tar -C "$root" -c . | "$ENGINE" import --change 'CMD ["/bin/bash"]' - "$DEBIAN_IMAGE" >/dev/null
  echo "local-bases: $DEBIAN_IMAGE"
fi

if ! exists localhost/waitingroom/golang:local; then
  goroot="$(go env GOROOT)"
  echo "local-bases: localhost/waitingroom/golang:local from $goroot ($(go env GOVERSION))"
  ctx="$(mktemp -d)"
  scratch+=("$ctx")
  mkdir "$ctx/local-ca"
  cp -al "$goroot" "$ctx/go" 2>/dev/null || cp -a "$goroot" "$ctx/go"
  find /usr/local/share/ca-certificates -name '*.crt' -exec cp {} "$ctx/local-ca/" \; 2>/dev/null || true
  "$ENGINE" build -q --network host --build-arg DEBIAN_IMAGE="$DEBIAN_IMAGE" \
    -f "$here/builder.Containerfile" -t localhost/waitingroom/golang:local "$ctx" >/dev/null
fi

if ! exists localhost/waitingroom/static:nonroot; then
  echo "local-bases: localhost/waitingroom/static:nonroot"
  "$ENGINE" build -q --network host --build-arg DEBIAN_IMAGE="$DEBIAN_IMAGE" \
    -f "$here/runtime.Containerfile" -t localhost/waitingroom/static:nonroot "$here" >/dev/null
fi
