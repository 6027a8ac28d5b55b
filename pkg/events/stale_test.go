package events_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/bufbuild/protocompile"
	"google.golang.org/protobuf/encoding/prototext"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protodesc"

	v1 "github.com/waitingroom/waitingroom/pkg/events/waitingroomv1"
)

// protoRoot is the import root of the schemas, relative to this package's
// directory (go test runs tests there).
const protoRoot = "../../proto"

// TestGeneratedCodeIsCurrent fails when events.pb.go no longer matches
// events.proto, without needing protoc or buf: it compiles the .proto in
// process and compares the result with the descriptor compiled into the
// generated code. Comments are not compared (protoc-gen-go does not embed
// them), so a comment-only edit passes; regenerate anyway to update the Go
// doc comments.
func TestGeneratedCodeIsCurrent(t *testing.T) {
	c := protocompile.Compiler{
		Resolver: protocompile.WithStandardImports(&protocompile.SourceResolver{
			ImportPaths: []string{protoRoot},
		}),
	}
	files, err := c.Compile(t.Context(), "waitingroom/v1/events.proto")
	if err != nil {
		t.Fatalf("compile %s/waitingroom/v1/events.proto: %v", protoRoot, err)
	}
	want := protodesc.ToFileDescriptorProto(files[0])
	want.SourceCodeInfo = nil
	got := protodesc.ToFileDescriptorProto(v1.File_waitingroom_v1_events_proto)

	if !proto.Equal(got, want) {
		t.Fatalf("events.pb.go is stale: run make proto\n%s", firstDiff(got, want))
	}
}

// firstDiff names the first line where the text forms of the generated (got)
// and compiled (want) descriptors differ, enough to see what changed.
func firstDiff(got, want proto.Message) string {
	opts := prototext.MarshalOptions{Multiline: true}
	g := strings.Split(opts.Format(got), "\n")
	w := strings.Split(opts.Format(want), "\n")
	for i := range max(len(g), len(w)) {
		var gl, wl string
		if i < len(g) {
			gl = g[i]
		}
		if i < len(w) {
			wl = w[i]
		}
		if gl != wl {
			return fmt.Sprintf("first difference, line %d of the descriptor:\n  events.pb.go: %s\n  events.proto: %s",
				i+1, strings.TrimSpace(gl), strings.TrimSpace(wl))
		}
	}
	return "descriptors differ only in ways their text form does not show"
}
