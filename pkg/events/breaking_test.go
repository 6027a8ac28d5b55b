package events_test

import (
	"errors"
	"flag"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/descriptorpb"

	"github.com/waitingroom/waitingroom/pkg/events/compat"
)

// releasePath is the descriptor of the last release of the contract,
// relative to this package's directory.
const releasePath = protoRoot + "/releases/waitingroom.v1.json"

var updateRelease = flag.Bool("update-release", false,
	"cut a new release: write proto/ compiled to "+releasePath+" (refused while proto/ breaks the last release)")

// TestContract fails when proto/ breaks a consumer of the last release, one
// line per break. After a compatible change has shipped, cut the new release
// descriptor with
//
//	go test ./pkg/events -run '^TestContract$' -update-release
func TestContract(t *testing.T) {
	cur, err := compat.Compile(t.Context(), protoRoot)
	if err != nil {
		t.Fatal(err)
	}
	release, err := compat.ReadRelease(releasePath)
	if errors.Is(err, fs.ErrNotExist) && *updateRelease {
		release = cur // the first release
	} else if err != nil {
		t.Fatalf("%v\n(cut the first release with: go test ./pkg/events -run '^TestContract$' -update-release)", err)
	}
	breaks, err := compat.Breaks(release, cur)
	if err != nil {
		t.Fatal(err)
	}
	if len(breaks) > 0 {
		t.Fatalf("proto/ breaks consumers of the last release (%s):\n  %s\n"+
			"Add instead: new fields with new numbers, new messages, new enum values; delete a field or value only "+
			"by reserving its number and name. A breaking change is a new package, waitingroom.v2 (docs/EVENTS.md).",
			releasePath, strings.Join(breaks, "\n  "))
	}
	if *updateRelease {
		if err := compat.WriteRelease(releasePath, cur); err != nil {
			t.Fatal(err)
		}
		t.Logf("wrote %s", releasePath)
	}
}

// TestReleaseFile checks that the committed release holds the contract's
// file after everything it imports (self-contained, as buf and protoc read
// a descriptor set), and that writing it again gives the same
// bytes: a release is only ever written by WriteRelease.
func TestReleaseFile(t *testing.T) {
	release, err := compat.ReadRelease(releasePath)
	if err != nil {
		t.Fatal(err)
	}
	var paths []string
	for _, f := range release.GetFile() {
		for _, dep := range f.GetDependency() {
			if !slices.Contains(paths, dep) {
				t.Errorf("release: %s comes before its import %s", f.GetName(), dep)
			}
		}
		paths = append(paths, f.GetName())
	}
	if !slices.Contains(paths, "waitingroom/v1/events.proto") {
		t.Errorf("release files = %q, want waitingroom/v1/events.proto among them", paths)
	}
	rewritten := filepath.Join(t.TempDir(), "release.json")
	if err := compat.WriteRelease(rewritten, release); err != nil {
		t.Fatal(err)
	}
	committed, _ := os.ReadFile(releasePath)
	again, _ := os.ReadFile(rewritten)
	if string(committed) != string(again) {
		t.Errorf("%s is not what WriteRelease writes for its contents: cut releases only with -update-release", releasePath)
	}
	back, err := compat.ReadRelease(rewritten)
	if err != nil || !proto.Equal(back, release) {
		t.Errorf("release does not survive a write and a read: %v", err)
	}
}

// edit is one change to events.proto: in the block of message or enum
// `in` ("message TokenIssued"), or in the whole file when in is "", replace
// old (which must occur exactly once there) with new.
type edit struct{ in, old, new string }

// TestBreaks changes a copy of events.proto on purpose and checks the exact
// breaks Breaks reports against the real one; before, when set, is applied
// to the baseline first (to start from a reservation the real file lacks).
func TestBreaks(t *testing.T) {
	for _, tc := range []struct {
		name          string
		before, after []edit
		want          []string
	}{
		{
			name:  "field removed",
			after: []edit{{"message TokenIssued", "  string user_id = 4;\n", ""}},
			want:  []string{`waitingroom.v1.TokenIssued: field 4 "user_id" removed`},
		},
		{
			name:  "field removed, its number and name reserved",
			after: []edit{{"message TokenIssued", "  string user_id = 4;\n", "  reserved 4;\n  reserved \"user_id\";\n"}},
		},
		{
			name:  "field removed, only its number reserved",
			after: []edit{{"message TokenIssued", "  string user_id = 4;\n", "  reserved 4;\n"}},
			want:  []string{`waitingroom.v1.TokenIssued: field 4 "user_id" removed, but only its number is reserved (reserve the name too)`},
		},
		{
			name:  "field removed, only its name reserved",
			after: []edit{{"message OrderFailed", "  bool restorable = 8;\n", "  reserved \"restorable\";\n"}},
			want:  []string{`waitingroom.v1.OrderFailed: field 8 "restorable" removed, but only its name is reserved (reserve the number too)`},
		},
		{
			name:  "field renumbered",
			after: []edit{{"message TokenIssued", "uint64 sequence = 8;", "uint64 sequence = 9;"}},
			want:  []string{`waitingroom.v1.TokenIssued: field "sequence" renumbered from 8 to 9`},
		},
		{
			name:  "field renumbered and its number reused",
			after: []edit{{"message OrderCreated", "  string user_id = 4;\n", "  string user_id = 10;\n  string buyer_id = 4;\n"}},
			want: []string{
				`waitingroom.v1.OrderCreated: field "user_id" renumbered from 4 to 10`,
				`waitingroom.v1.OrderCreated: field 4 (was "user_id") reused by "buyer_id"`,
			},
		},
		{
			name:  "field renamed",
			after: []edit{{"message OrderCreated", "string user_id = 4;", "string buyer_id = 4;"}},
			want:  []string{`waitingroom.v1.OrderCreated: field 4 "user_id" renamed to "buyer_id"`},
		},
		{
			name:  "two fields swap numbers",
			after: []edit{{"message TokenIssued", "string queue_id = 3;\n  // The admitted user: the \"sub\" claim of their JWT.\n  string user_id = 4;", "string queue_id = 4;\n  string user_id = 3;"}},
			want: []string{
				`waitingroom.v1.TokenIssued: field "queue_id" renumbered from 3 to 4`,
				`waitingroom.v1.TokenIssued: field "user_id" renumbered from 4 to 3`,
			},
		},
		{
			name:  "scalar type changed",
			after: []edit{{"message OrderCreated", "int32 quantity = 8;", "int64 quantity = 8;"}},
			want:  []string{`waitingroom.v1.OrderCreated: field 8 "quantity" type changed from int32 to int64`},
		},
		{
			name:  "wire-compatible type changed",
			after: []edit{{"message TokenIssued", "uint64 sequence = 8;", "int64 sequence = 8;"}},
			want:  []string{`waitingroom.v1.TokenIssued: field 8 "sequence" type changed from uint64 to int64`},
		},
		{
			name:  "message type changed to a scalar",
			after: []edit{{"message TokenIssued", "google.protobuf.Timestamp expires_at = 7;", "string expires_at = 7;"}},
			want:  []string{`waitingroom.v1.TokenIssued: field 7 "expires_at" type changed from message google.protobuf.Timestamp to string`},
		},
		{
			name:  "enum type name changed",
			after: []edit{{"message TokenExpired", "TokenExpiredReason reason = 6;", "OrderFailureReason reason = 6;"}},
			want:  []string{`waitingroom.v1.TokenExpired: field 6 "reason" type changed from enum waitingroom.v1.TokenExpiredReason to enum waitingroom.v1.OrderFailureReason`},
		},
		{
			name:  "cardinality changed",
			after: []edit{{"message TokenIssued", "uint64 sequence = 8;", "repeated uint64 sequence = 8;"}},
			want:  []string{`waitingroom.v1.TokenIssued: field 8 "sequence" cardinality changed from singular to repeated`},
		},
		{
			name:  "JSON name changed",
			after: []edit{{"message OrderCreated", "string user_id = 4;", "string user_id = 4 [json_name = \"buyer\"];"}},
			want:  []string{`waitingroom.v1.OrderCreated: field 4 "user_id" JSON name changed from "userId" to "buyer"`},
		},
		{
			name:  "field moved into a oneof",
			after: []edit{{"message OrderCreated", "  bool bypassed = 9;\n", "  oneof mode {\n    bool bypassed = 9;\n  }\n"}},
			want:  []string{`waitingroom.v1.OrderCreated: field 9 "bypassed" moved into oneof "mode"`},
		},
		{
			name:  "message removed",
			after: []edit{{"", "message QueueDrawn {", "message QueueDrawnRenamed {"}},
			want:  []string{`message waitingroom.v1.QueueDrawn removed`},
		},
		{
			name: "enum removed",
			after: []edit{
				{"message TokenExpired", "TokenExpiredReason reason = 6;", "int32 reason = 6;"},
				{"", "enum TokenExpiredReason {", "enum TokenEndReason {"},
			},
			want: []string{
				`waitingroom.v1.TokenExpired: field 6 "reason" type changed from enum waitingroom.v1.TokenExpiredReason to int32`,
				`enum waitingroom.v1.TokenExpiredReason removed`,
			},
		},
		{
			name:  "enum value removed",
			after: []edit{{"enum OrderFailureReason", "  ORDER_FAILURE_REASON_PAYMENT_DECLINED = 6;\n", ""}},
			want:  []string{`waitingroom.v1.OrderFailureReason: value 6 "ORDER_FAILURE_REASON_PAYMENT_DECLINED" removed`},
		},
		{
			name: "enum value removed, its number and name reserved",
			after: []edit{{"enum OrderFailureReason", "  ORDER_FAILURE_REASON_PAYMENT_DECLINED = 6;\n",
				"  reserved 6;\n  reserved \"ORDER_FAILURE_REASON_PAYMENT_DECLINED\";\n"}},
		},
		{
			name:  "enum value renumbered",
			after: []edit{{"enum TokenExpiredReason", "TOKEN_EXPIRED_REASON_RESTORE_TOO_LATE = 2;", "TOKEN_EXPIRED_REASON_RESTORE_TOO_LATE = 3;"}},
			want:  []string{`waitingroom.v1.TokenExpiredReason: value "TOKEN_EXPIRED_REASON_RESTORE_TOO_LATE" renumbered from 2 to 3`},
		},
		{
			name:  "enum value renamed",
			after: []edit{{"enum TokenExpiredReason", "TOKEN_EXPIRED_REASON_NO_SHOW = 1;", "TOKEN_EXPIRED_REASON_ABSENT = 1;"}},
			want:  []string{`waitingroom.v1.TokenExpiredReason: value 1 "TOKEN_EXPIRED_REASON_NO_SHOW" renamed to "TOKEN_EXPIRED_REASON_ABSENT"`},
		},
		{
			name:   "reservation dropped",
			before: []edit{{"message OrderHealth", "  uint64 outbox_backlog = 11;\n", "  uint64 outbox_backlog = 11;\n  reserved 12 to 14, 20;\n  reserved \"lag_ms\";\n"}},
			after:  []edit{{"message OrderHealth", "  reserved 12 to 14, 20;\n  reserved \"lag_ms\";\n", "  reserved 12, 14;\n  uint64 lag_ms = 13;\n"}},
			want: []string{
				`waitingroom.v1.OrderHealth: reserved name "lag_ms" no longer reserved`,
				`waitingroom.v1.OrderHealth: reserved numbers 12 to 14 no longer all reserved`,
				`waitingroom.v1.OrderHealth: reserved number 20 no longer reserved`,
			},
		},
		{
			name: "package changed",
			after: []edit{
				{"", "package waitingroom.v1;", "package waitingroom.v2;"},
				{"", "pkg/events/waitingroomv1;waitingroomv1", "pkg/events/waitingroomv2;waitingroomv2"},
			},
			want: []string{
				`waitingroom/v1/events.proto: package changed from waitingroom.v1 to waitingroom.v2`,
				`message waitingroom.v1.TokenIssued removed`,
				`message waitingroom.v1.TokensIssued removed`,
				`message waitingroom.v1.TokenRestored removed`,
				`message waitingroom.v1.TokenExpired removed`,
				`message waitingroom.v1.OrderCreated removed`,
				`message waitingroom.v1.OrderFailed removed`,
				`message waitingroom.v1.QueueStarted removed`,
				`message waitingroom.v1.QueueDrawn removed`,
				`message waitingroom.v1.OrderHealth removed`,
				`message waitingroom.v1.UserAbandoned removed`,
				`message waitingroom.v1.QueueChanged removed`,
				`message waitingroom.v1.QueueMinute removed`,
				`enum waitingroom.v1.TokenExpiredReason removed`,
				`enum waitingroom.v1.OrderFailureReason removed`,
				`enum waitingroom.v1.UserAbandonedReason removed`,
				`enum waitingroom.v1.QueueChangeOutcome removed`,
				`enum waitingroom.v1.QueueChangeAction removed`,
			},
		},
		{
			name: "additions break nothing",
			after: []edit{
				{"message OrderCreated", "  bool bypassed = 9;\n", "  bool bypassed = 9;\n  string campaign_id = 10;\n  map<string, string> labels = 11;\n"},
				{"enum OrderFailureReason", "  ORDER_FAILURE_REASON_ORDER_LIMIT_REACHED = 7;\n", "  ORDER_FAILURE_REASON_ORDER_LIMIT_REACHED = 7;\n  ORDER_FAILURE_REASON_FRAUD = 8;\n"},
				{"", "// TokenIssued: a user", "message QueuePaused {\n  string event_id = 1;\n}\n\nenum PauseReason {\n  PAUSE_REASON_UNSPECIFIED = 0;\n}\n\n// TokenIssued: a user"},
				// Explicit presence shares the wire and JSON with implicit.
				{"message TokenIssued", "uint64 sequence = 8;", "optional uint64 sequence = 8;"},
			},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			src, err := os.ReadFile(protoRoot + "/waitingroom/v1/events.proto")
			if err != nil {
				t.Fatal(err)
			}
			old := compileEdited(t, string(src), tc.before)
			got, err := compat.Breaks(old, compileEdited(t, string(src), slices.Concat(tc.before, tc.after)))
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("breaks:\n  %s\nwant:\n  %s", strings.Join(got, "\n  "), strings.Join(tc.want, "\n  "))
			}
		})
	}
}

// TestBreaksOfMaps covers map fields, which events.proto does not have yet:
// a changed value type names the map, not its generated entry message.
func TestBreaksOfMaps(t *testing.T) {
	const proto = "syntax = \"proto3\";\npackage m.v1;\nmessage M {\n  %s labels = 1;\n}\n"
	compile := func(field string) *descriptorpb.FileDescriptorSet {
		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, "m.proto"), []byte(strings.Replace(proto, "%s", field, 1)), 0o644); err != nil {
			t.Fatal(err)
		}
		set, err := compat.Compile(t.Context(), dir)
		if err != nil {
			t.Fatal(err)
		}
		return set
	}
	for _, tc := range []struct {
		from, to string
		want     []string
	}{
		{"map<string, string>", "map<string, string>", nil},
		{"map<string, string>", "map<string, int64>", []string{`m.v1.M: field 1 "labels" type changed from map<string, string> to map<string, int64>`}},
		{"repeated string", "map<string, string>", []string{
			`m.v1.M: field 1 "labels" type changed from string to map<string, string>`,
			`m.v1.M: field 1 "labels" cardinality changed from repeated to map`,
		}},
	} {
		got, err := compat.Breaks(compile(tc.from), compile(tc.to))
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(got, tc.want) {
			t.Errorf("%s -> %s: breaks %q, want %q", tc.from, tc.to, got, tc.want)
		}
	}
}

// compileEdited writes src with edits applied as waitingroom/v1/events.proto
// under a temporary import root and compiles it.
func compileEdited(t *testing.T, src string, edits []edit) *descriptorpb.FileDescriptorSet {
	t.Helper()
	for _, e := range edits {
		src = apply(t, src, e)
	}
	root := t.TempDir()
	path := filepath.Join(root, "waitingroom", "v1", "events.proto")
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	set, err := compat.Compile(t.Context(), root)
	if err != nil {
		t.Fatalf("the edited events.proto does not compile: %v", err)
	}
	return set
}

// apply makes one edit, failing the test when its text is not exactly once
// where it should be (events.proto changed under the test).
func apply(t *testing.T, src string, e edit) string {
	t.Helper()
	start, end := 0, len(src)
	if e.in != "" {
		i := strings.Index(src, "\n"+e.in+" {\n")
		if i < 0 {
			t.Fatalf("events.proto has no %q", e.in)
		}
		start = i + 1
		end = start + strings.Index(src[start:], "\n}\n") + 1 // the block's last newline included
	}
	block := src[start:end]
	if n := strings.Count(block, e.old); n != 1 {
		t.Fatalf("%q occurs %d times in %q of events.proto, want once", e.old, n, e.in)
	}
	return src[:start] + strings.Replace(block, e.old, e.new, 1) + src[end:]
}
