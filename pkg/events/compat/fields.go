package compat

import (
	"fmt"
	"slices"

	"google.golang.org/protobuf/reflect/protoreflect"
)

// fields compares the fields of one message, each old field with the new
// field of the same name and the one of the same number.
func (c *comparison) fields(old, new protoreflect.MessageDescriptor) {
	msg := old.FullName()
	for i := range old.Fields().Len() {
		f := old.Fields().Get(i)
		byName, byNumber := new.Fields().ByName(f.Name()), new.Fields().ByNumber(f.Number())
		switch {
		case byName != nil && byName.Number() != f.Number():
			c.addf("%s: field %q renumbered from %d to %d", msg, f.Name(), f.Number(), byName.Number())
			if byNumber != nil && old.Fields().ByName(byNumber.Name()) == nil {
				c.addf("%s: field %d (was %q) reused by %q", msg, f.Number(), f.Name(), byNumber.Name())
			}
			continue
		case byName == nil && byNumber != nil:
			c.addf("%s: field %d %q renamed to %q", msg, f.Number(), f.Name(), byNumber.Name())
		case byName == nil:
			c.deleted(msg, "field", int64(f.Number()), string(f.Name()),
				new.ReservedRanges().Has(f.Number()), new.ReservedNames().Has(f.Name()))
			continue
		}
		c.field(msg, f, byNumber)
	}
}

// field compares what a field of one number is: its type, cardinality, JSON
// name and oneof.
func (c *comparison) field(msg protoreflect.FullName, old, new protoreflect.FieldDescriptor) {
	at := fmt.Sprintf("%s: field %d %q", msg, old.Number(), old.Name())
	if was, is := typeName(old), typeName(new); was != is {
		c.addf("%s type changed from %s to %s", at, was, is)
	}
	if was, is := cardinality(old), cardinality(new); was != is {
		c.addf("%s cardinality changed from %s to %s", at, was, is)
	}
	if old.Name() == new.Name() && old.JSONName() != new.JSONName() {
		c.addf("%s JSON name changed from %q to %q", at, old.JSONName(), new.JSONName())
	}
	was, is := oneof(old), oneof(new)
	switch {
	case was == is:
	case was == "":
		c.addf("%s moved into oneof %q", at, is)
	case is == "":
		c.addf("%s moved out of oneof %q", at, was)
	default:
		c.addf("%s moved from oneof %q to oneof %q", at, was, is)
	}
}

// values compares the values of one enum, like fields.
func (c *comparison) values(old, new protoreflect.EnumDescriptor) {
	enum := old.FullName()
	for i := range old.Values().Len() {
		v := old.Values().Get(i)
		byName, byNumber := new.Values().ByName(v.Name()), new.Values().ByNumber(v.Number())
		switch {
		case byName != nil && byName.Number() == v.Number():
		case byName != nil:
			c.addf("%s: value %q renumbered from %d to %d", enum, v.Name(), v.Number(), byName.Number())
			if byNumber != nil && old.Values().ByName(byNumber.Name()) == nil {
				c.addf("%s: value %d (was %q) reused by %q", enum, v.Number(), v.Name(), byNumber.Name())
			}
		case byNumber != nil && old.Values().ByName(byNumber.Name()) == nil:
			c.addf("%s: value %d %q renamed to %q", enum, v.Number(), v.Name(), byNumber.Name())
		default: // gone, or an alias of a number that other names keep
			c.deleted(enum, "value", int64(v.Number()), string(v.Name()),
				new.ReservedRanges().Has(v.Number()), new.ReservedNames().Has(v.Name()))
		}
	}
}

// deleted reports a field or enum value that is gone unless both its number
// (so nobody reuses it on the wire) and its name (nor in JSON) are reserved.
func (c *comparison) deleted(parent protoreflect.FullName, what string, number int64, name string, numberReserved, nameReserved bool) {
	at := fmt.Sprintf("%s: %s %d %q removed", parent, what, number, name)
	switch {
	case numberReserved && nameReserved:
	case numberReserved:
		c.addf("%s, but only its number is reserved (reserve the name too)", at)
	case nameReserved:
		c.addf("%s, but only its name is reserved (reserve the number too)", at)
	default:
		c.addf("%s", at)
	}
}

// reserved reports reserved names and numbers of a message or enum that are
// no longer reserved: a later field or value could take them, and old
// consumers would read it as the deleted one. Ranges are inclusive.
func (c *comparison) reserved(parent protoreflect.FullName, oldNames protoreflect.Names, oldRanges [][2]int64, newNames protoreflect.Names, newRanges [][2]int64) {
	for i := range oldNames.Len() {
		if n := oldNames.Get(i); !newNames.Has(n) {
			c.addf("%s: reserved name %q no longer reserved", parent, n)
		}
	}
	for _, r := range oldRanges {
		switch {
		case covered(newRanges, r[0], r[1]):
		case r[0] == r[1]:
			c.addf("%s: reserved number %d no longer reserved", parent, r[0])
		default:
			c.addf("%s: reserved numbers %d to %d no longer all reserved", parent, r[0], r[1])
		}
	}
}

// covered reports whether the ranges rs hold every number from s to e.
func covered(rs [][2]int64, s, e int64) bool {
	for s <= e {
		i := slices.IndexFunc(rs, func(r [2]int64) bool { return r[0] <= s && s <= r[1] })
		if i < 0 {
			return false
		}
		s = rs[i][1] + 1
	}
	return true
}

// fieldRanges is a message's reserved ranges, inclusive (a descriptor's end
// is exclusive).
func fieldRanges(rs protoreflect.FieldRanges) [][2]int64 {
	out := make([][2]int64, rs.Len())
	for i := range rs.Len() {
		r := rs.Get(i)
		out[i] = [2]int64{int64(r[0]), int64(r[1]) - 1}
	}
	return out
}

// enumRanges is an enum's reserved ranges, inclusive as in the descriptor.
func enumRanges(rs protoreflect.EnumRanges) [][2]int64 {
	out := make([][2]int64, rs.Len())
	for i := range rs.Len() {
		r := rs.Get(i)
		out[i] = [2]int64{int64(r[0]), int64(r[1])}
	}
	return out
}

// typeName is a field's type as the .proto spells it, with the full name of a
// message or enum: "string", "message google.protobuf.Timestamp",
// "map<string, int64>".
func typeName(f protoreflect.FieldDescriptor) string {
	switch {
	case f.IsMap():
		return fmt.Sprintf("map<%s, %s>", typeName(f.MapKey()), typeName(f.MapValue()))
	case f.Enum() != nil:
		return "enum " + string(f.Enum().FullName())
	case f.Message() != nil && f.Kind() == protoreflect.GroupKind:
		return "group " + string(f.Message().FullName())
	case f.Message() != nil:
		return "message " + string(f.Message().FullName())
	}
	return f.Kind().String()
}

// cardinality groups cardinalities the way WIRE_JSON does: implicit and
// explicit presence (proto3 optional) are one, as they share wire and JSON.
func cardinality(f protoreflect.FieldDescriptor) string {
	switch {
	case f.IsMap():
		return "map"
	case f.IsList():
		return "repeated"
	case f.Cardinality() == protoreflect.Required:
		return "required"
	}
	return "singular"
}

// oneof is the name of the real oneof f belongs to, or "" (the synthetic
// oneof of a proto3 optional field does not count).
func oneof(f protoreflect.FieldDescriptor) protoreflect.Name {
	if o := f.ContainingOneof(); o != nil && !o.IsSynthetic() {
		return o.Name()
	}
	return ""
}
