#!/usr/bin/env bash
# Regenerates pkg/events/waitingroomv1/events.pb.go from
# proto/waitingroom/v1/events.proto. `make proto` runs it; it works from any
# directory and running it twice changes nothing.
#
# It needs only Go and the Go module proxy:
#   - buf is built at a pinned version, so every machine lints and generates
#     the same way (the first run compiles it, later runs hit the build cache);
#   - protoc-gen-go is built from pkg/go.mod, so the generated code always
#     matches the google.golang.org/protobuf runtime pkg compiles against.
# pkg/events/stale_test.go fails `go test` when the committed file no longer
# matches the .proto.
set -euo pipefail

BUF_VERSION=v1.75.0
OUT=pkg/events/waitingroomv1/events.pb.go

cd "$(dirname "${BASH_SOURCE[0]}")/../.."
GO="${GO:-go}"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT

say() { printf 'proto: %s\n' "$*"; }

# GOWORK=off: take protoc-gen-go's version from pkg/go.mod alone, not from what
# the workspace as a whole selects.
version="$(cd pkg && GOWORK=off "$GO" list -m -f '{{.Version}}' google.golang.org/protobuf)"
say "building protoc-gen-go $version (google.golang.org/protobuf, from pkg/go.mod)"
(cd pkg && GOWORK=off "$GO" build -o "$tmp/" google.golang.org/protobuf/cmd/protoc-gen-go)

say "building buf $BUF_VERSION"
GOBIN="$tmp" GOWORK=off "$GO" install "github.com/bufbuild/buf/cmd/buf@$BUF_VERSION"

say "buf lint proto"
"$tmp/buf" lint proto

[[ -f "$OUT" ]] && cp "$OUT" "$tmp/before.pb.go"
say "buf generate proto --template deploy/proto/buf.gen.yaml"
PATH="$tmp:$PATH" "$tmp/buf" generate proto --template deploy/proto/buf.gen.yaml

if cmp -s "$OUT" "$tmp/before.pb.go"; then
  say "$OUT unchanged"
else
  say "$OUT written"
fi
