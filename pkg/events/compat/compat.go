// Package compat keeps the event contract from breaking silently: it compiles
// the .proto files of proto/ in process (github.com/bufbuild/protocompile, no
// protoc or buf binary) and lists every change from the descriptor of the last
// release that would break a consumer built against that release.
//
// What breaks follows buf's WIRE_JSON category, which proto/buf.yaml names
// (a consumer may decode the binary body or its protobuf JSON form), and is
// stricter in three places, because the AMQP type property of every event is
// the full message name a consumer decodes by:
//   - a message or enum may not be removed or renamed, not even with nothing
//     pointing at it (buf's WIRE_JSON lets both pass);
//   - the package may not change;
//   - any change of a field's type breaks, also the wire- and JSON-compatible
//     ones buf lets pass (int32 to uint32, int64 to uint64, an enum for
//     another with the same numbers): generated code changes type, and a
//     negative int32 read as uint32 is another number.
//
// Like WIRE_JSON, a field or enum value may be deleted only when both its
// number and its name are reserved; a field's name, number, type,
// cardinality (singular, repeated, map), JSON name and oneof may not change;
// reserved numbers and names stay reserved. Adding fields, messages, enums
// and enum values never breaks. Making a proto3 field optional (explicit
// presence) does not break the wire or JSON, so it passes, as in buf.
// Services and extensions are not compared: the contract has none.
//
// The descriptor of the last release is committed as a FileDescriptorSet in
// protobuf JSON (see WriteRelease for why JSON); pkg/events/breaking_test.go
// compares proto/ with it and cuts a new one with -update-release.
package compat

import (
	"context"
	"fmt"
	"io/fs"
	"path/filepath"
	"slices"

	"github.com/bufbuild/protocompile"
	"google.golang.org/protobuf/reflect/protodesc"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/descriptorpb"
)

// Compile compiles every .proto file under root (root is the import path, as
// for buf: proto/waitingroom/v1/events.proto is "waitingroom/v1/events.proto")
// and returns them with everything they import (the well-known types
// included), dependencies first, as protoc --include_imports writes them.
// Source info (comments, positions) is left out: it is not part of the
// contract.
func Compile(ctx context.Context, root string) (*descriptorpb.FileDescriptorSet, error) {
	var paths []string
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || filepath.Ext(p) != ".proto" {
			return err
		}
		rel, err := filepath.Rel(root, p)
		paths = append(paths, filepath.ToSlash(rel))
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("compat: find .proto files: %w", err)
	}
	if len(paths) == 0 {
		return nil, fmt.Errorf("compat: no .proto file under %s", root)
	}
	slices.Sort(paths)
	c := protocompile.Compiler{
		Resolver: protocompile.WithStandardImports(&protocompile.SourceResolver{ImportPaths: []string{root}}),
	}
	files, err := c.Compile(ctx, paths...)
	if err != nil {
		return nil, fmt.Errorf("compat: compile %s: %w", root, err)
	}
	set := &descriptorpb.FileDescriptorSet{}
	done := map[string]bool{}
	var add func(f protoreflect.FileDescriptor)
	add = func(f protoreflect.FileDescriptor) {
		if done[f.Path()] {
			return
		}
		done[f.Path()] = true
		for i := range f.Imports().Len() {
			add(f.Imports().Get(i).FileDescriptor)
		}
		set.File = append(set.File, protodesc.ToFileDescriptorProto(f))
	}
	for _, f := range files {
		add(f)
	}
	return set, nil
}

// Breaks lists, one line each and in declaration order, every change from
// old (the last release) to new that breaks a consumer of old, e.g.
//
//	waitingroom.v1.TokenIssued: field 4 "user_id" removed
//
// An empty list means new is compatible. It fails only when a set does not
// build into descriptors (a file or an import missing).
func Breaks(old, new *descriptorpb.FileDescriptorSet) ([]string, error) {
	was, err := protodesc.NewFiles(old)
	if err != nil {
		return nil, fmt.Errorf("compat: the old descriptor set: %w", err)
	}
	is, err := protodesc.NewFiles(new)
	if err != nil {
		return nil, fmt.Errorf("compat: the new descriptor set: %w", err)
	}
	c := &comparison{new: is}
	was.RangeFiles(func(f protoreflect.FileDescriptor) bool {
		if nf, err := is.FindFileByPath(f.Path()); err == nil && nf.Package() != f.Package() {
			c.addf("%s: package changed from %s to %s", f.Path(), f.Package(), nf.Package())
		}
		c.messages(f.Messages())
		c.enums(f.Enums())
		return true
	})
	return c.breaks, nil
}

// comparison collects the breaks of one Breaks call.
type comparison struct {
	new interface {
		FindDescriptorByName(protoreflect.FullName) (protoreflect.Descriptor, error)
	}
	breaks []string
}

func (c *comparison) addf(format string, args ...any) {
	c.breaks = append(c.breaks, fmt.Sprintf(format, args...))
}

func (c *comparison) messages(ms protoreflect.MessageDescriptors) {
	for i := range ms.Len() {
		old := ms.Get(i)
		if old.IsMapEntry() {
			continue // generated for a map field: the field's type says it all
		}
		d, _ := c.new.FindDescriptorByName(old.FullName())
		m, ok := d.(protoreflect.MessageDescriptor)
		if !ok {
			c.addf("message %s removed", old.FullName())
			continue
		}
		c.fields(old, m)
		c.reserved(old.FullName(), old.ReservedNames(), fieldRanges(old.ReservedRanges()), m.ReservedNames(), fieldRanges(m.ReservedRanges()))
		c.messages(old.Messages())
		c.enums(old.Enums())
	}
}

func (c *comparison) enums(es protoreflect.EnumDescriptors) {
	for i := range es.Len() {
		old := es.Get(i)
		d, _ := c.new.FindDescriptorByName(old.FullName())
		e, ok := d.(protoreflect.EnumDescriptor)
		if !ok {
			c.addf("enum %s removed", old.FullName())
			continue
		}
		c.values(old, e)
		c.reserved(old.FullName(), old.ReservedNames(), enumRanges(old.ReservedRanges()), e.ReservedNames(), enumRanges(e.ReservedRanges()))
	}
}
