#!/usr/bin/env bash
# Prepares podman on a machine like CI's (Debian, root, no Docker engine, no
# systemd): --install installs podman, buildah, runc, debootstrap and
# iproute2 when missing; then containers.conf and storage.conf from this folder go to
# /etc/containers/ unless the machine has its own there already.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
if [[ "${1:-}" == --install ]]; then
  missing=()
  for p in podman buildah runc debootstrap; do command -v "$p" >/dev/null 2>&1 || missing+=("$p"); done
  # The compose test makes a network namespace and a veth pair with ip.
  command -v ip >/dev/null 2>&1 || missing+=(iproute2)
  if ((${#missing[@]})); then
    echo "podman-setup: installing ${missing[*]}"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq && apt-get install -y -qq "${missing[@]}" >/dev/null
  fi
fi
mkdir -p /etc/containers
for f in containers.conf storage.conf; do
  if [[ ! -e /etc/containers/$f ]]; then
    cp "$here/$f" "/etc/containers/$f"
    echo "podman-setup: /etc/containers/$f from deploy/images/$f"
  fi
done
podman info --format 'podman-setup: podman {{.Version.Version}}, runtime {{.Host.OCIRuntime.Name}}, storage {{.Store.GraphDriverName}}, cgroups {{.Host.CgroupManager}}'
