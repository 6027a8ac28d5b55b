package compat

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/types/descriptorpb"
)

// ReadRelease reads a release descriptor WriteRelease wrote.
func ReadRelease(path string) (*descriptorpb.FileDescriptorSet, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("compat: read release: %w", err)
	}
	set := &descriptorpb.FileDescriptorSet{}
	if err := protojson.Unmarshal(b, set); err != nil {
		return nil, fmt.Errorf("compat: release %s: %w", path, err)
	}
	return set, nil
}

// WriteRelease writes set to path as protobuf JSON, indented by two spaces,
// the same bytes for the same set.
//
// JSON rather than binary (.binpb): a release is cut in a pull request, and
// JSON shows the reviewer what the new contract adds, line by line, where a
// binary file shows nothing. buf reads it as well (a .json image:
// `buf breaking proto --against proto/releases/waitingroom.v1.json`). protojson
// varies its spacing on purpose, so the output is re-indented with
// encoding/json, which keeps the order of the fields (their numbers').
func WriteRelease(path string, set *descriptorpb.FileDescriptorSet) error {
	b, err := protojson.Marshal(set)
	if err != nil {
		return fmt.Errorf("compat: encode release: %w", err)
	}
	var out bytes.Buffer
	if err := json.Indent(&out, b, "", "  "); err != nil {
		return fmt.Errorf("compat: indent release: %w", err)
	}
	out.WriteByte('\n')
	if err := os.WriteFile(path, out.Bytes(), 0o644); err != nil {
		return fmt.Errorf("compat: write release: %w", err)
	}
	return nil
}
