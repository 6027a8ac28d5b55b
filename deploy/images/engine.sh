#!/usr/bin/env bash
# Prints the container engine to use: $ENGINE if set, else podman, else
# docker, whichever is installed first.
set -euo pipefail
if [[ -n "${ENGINE:-}" ]]; then echo "$ENGINE"; exit 0; fi
for e in podman docker; do
  if command -v "$e" >/dev/null 2>&1; then echo "$e"; exit 0; fi
done
echo "engine: neither podman nor docker is installed (apt-get install podman buildah runc)" >&2
exit 1
