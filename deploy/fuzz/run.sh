#!/usr/bin/env bash
# Runs every Go fuzz target of the workspace, one after another, each for
# FUZZTIME (default 30s). `make fuzz` runs it; `make test` runs only the seed
# corpora (f.Add and testdata/fuzz), as plain `go test` does.
#
# Targets are found, not listed here: the packages of every workspace module
# with a `func Fuzz...` in a _test.go file are asked for their targets with
# `go test -list`, and each target gets its own `go test -fuzz` (go test
# fuzzes one target per run). A failure does not stop the others; the
# summary names each target's executions, corpus growth and result, and a
# failing input (written under the package's testdata/fuzz/) with the
# command that replays it. Exit status 1 when any target failed; the Go
# toolchain's own end-of-run deadline race (go.dev/issue/75804) is reported
# but is no failure.
#
# FUZZ_MATCH (a regexp) picks targets by name, e.g. FUZZ_MATCH=Order.
set -uo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/../.."
GO="${GO:-go}"
FUZZTIME="${FUZZTIME:-30s}"
MATCH="${FUZZ_MATCH:-.}"
root="$(pwd)"
logs="$(mktemp -d)"
trap 'rm -rf "$logs"' EXIT

say() { printf 'fuzz: %s\n' "$*"; }

mapfile -t modules < <("$GO" list -m -f '{{.Dir}}')
mapfile -t dirs < <(grep -rlE --include='*_test.go' --exclude-dir=testdata '^func Fuzz[A-Za-z0-9_]*\(' "${modules[@]}" |
	xargs -r -n1 dirname | sort -u)

targets=() # "./relative/dir FuzzName"
say "finding the targets of ${#dirs[@]} packages: each package's tests are compiled once (minutes on a cold build cache)"
for d in "${dirs[@]}"; do
	rel="./${d#"$root"/}"
	say "listing $rel"
	if ! out="$("$GO" test -list '^Fuzz' "$rel" 2>&1)"; then
		printf '%s\n' "$out"
		say "listing $rel failed"
		exit 1
	fi
	while read -r name; do
		[[ "$name" =~ $MATCH ]] && targets+=("$rel $name")
	done < <(grep -E '^Fuzz[A-Za-z0-9_]*$' <<<"$out")
done
if ((${#targets[@]} == 0)); then
	say "no fuzz targets match '$MATCH'"
	exit 1
fi
say "${#targets[@]} targets, $FUZZTIME each"

failed=0
summary=()
for t in "${targets[@]}"; do
	read -r rel name <<<"$t"
	log="$logs/$name.log"
	say "$name ($rel): building its instrumented test binary, then fuzzing for $FUZZTIME"
	"$GO" test -run '^$' -fuzz "^${name}\$" -fuzztime "$FUZZTIME" "$rel" 2>&1 | tee "$log"
	rc=${PIPESTATUS[0]}
	last="$(grep -E '^fuzz: elapsed' "$log" | tail -1)"
	execs="$(sed -nE 's/.*execs: ([0-9]+).*/\1/p' <<<"$last")"
	grown="$(sed -nE 's/.*new interesting: ([0-9]+) \(total: ([0-9]+)\).*/+\1 of \2/p' <<<"$last")"
	result=ok
	# go1.26's coordinator may end a clean run with a bare "context
	# deadline exceeded" when FUZZTIME runs out mid-call (go.dev/issue/75804,
	# fixed in go1.27): no input failed, so it is not a finding.
	if ((rc != 0)) && grep -A1 -E "^--- FAIL: ${name} \(" "$log" | grep -qxE '[[:space:]]+context deadline exceeded' &&
		! grep -qE "Failing input written|--- FAIL: ${name}/" "$log"; then
		rc=0
		result="ok (ended by go.dev/issue/75804, no failing input)"
	fi
	if ((rc != 0)); then
		failed=1
		result=FAIL
		input="$(sed -nE 's/.*Failing input written to (testdata\/fuzz\/[^ ]+).*/\1/p' "$log" | tail -1)"
		seed="$(sed -nE "s/.*--- FAIL: ${name}\/([^ ]+).*/\1/p" "$log" | head -1)"
		if [[ -n "$input" ]]; then
			result="FAIL: $rel/$input (replay: go test -run '^${name}/${input##*/}\$' $rel)"
		elif [[ -n "$seed" ]]; then
			result="FAIL on the seed corpus: $name/$seed (go test -run '^${name}\$' $rel)"
		fi
	fi
	summary+=("$(printf '%-22s %-48s %12s  %-14s %s' "$name" "$rel" "${execs:--}" "${grown:--}" "$result")")
done

printf '\n%-22s %-48s %12s  %-14s %s\n' target package execs corpus result
printf '%s\n' "${summary[@]}"
exit "$failed"
