package main

import (
	"bytes"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// root is the repository root, seen from this package's directory.
const root = "../.."

// What make docs would write is what is committed: a setting or knob
// changed in Go without make docs fails here, and so does one without a
// doc comment (generate refuses it).
func TestGeneratedDocsAreCurrent(t *testing.T) {
	t.Parallel()
	files, err := generate(root)
	if err != nil {
		t.Fatalf("%v\nevery env field and queue knob needs a doc comment: it is the setting's documentation", err)
	}
	for _, f := range files {
		have, err := os.ReadFile(filepath.Join(root, f.path))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(have, f.data) {
			t.Errorf("%s is not what the config structs' comments give: run make docs", f.path)
		}
	}
}

// Every env tag in the services' and pkg's code is a row of the reference,
// found by a plain text search, apart from the walk over the Config
// structs: a setting declared where no Config reaches is reported too.
func TestEveryEnvTagIsDocumented(t *testing.T) {
	t.Parallel()
	decls, err := envDecls(root)
	if err != nil {
		t.Fatal(err)
	}
	found := map[string]bool{}
	for _, d := range decls {
		found[d.name] = true
	}
	tag := regexp.MustCompile("`[^`]*\\benv:\"([A-Z0-9_]+)")
	for _, dir := range []string{"pkg", "services"} {
		err := filepath.WalkDir(filepath.Join(root, dir), func(p string, d os.DirEntry, err error) error {
			if err != nil || d.IsDir() || !strings.HasSuffix(p, ".go") || strings.HasSuffix(p, "_test.go") ||
				strings.Contains(filepath.ToSlash(p), "/testdata/") {
				return err
			}
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			for _, m := range tag.FindAllSubmatch(b, -1) {
				if !found[string(m[1])] {
					t.Errorf("%s: %s is read from the environment but in no service's Config", p, m[1])
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
}

// The walk follows embedded structs of another package (under any import
// name), local ones and prefixed nested ones, keeps each service's default
// and the comment of an embedding line.
func TestEnvDecls(t *testing.T) {
	t.Parallel()
	decls, err := envDecls("testdata/env")
	if err != nil {
		t.Fatal(err)
	}
	vars, err := variables(decls)
	if err != nil {
		t.Fatal(err)
	}
	services := services(decls)
	type row struct{ name, readBy, def, kind, meaning string }
	var got []row
	for _, v := range vars {
		got = append(got, row{v.name, readBy(v, services), defaults(v), kind(v.decls[0]), meaning(v)})
	}
	want := []row{
		{"ADDR", "every service", "`:1` alpha<br>`:2` beta", "string", "ADDR is where the service listens."},
		{"KEYS", "every service", "unset", `list (";"-separated), secret`, "KEYS, when set, sign things.<br>*alpha:* Shared: alpha logs a lot."},
		{"LEVEL", "every service", "`info`", "string", "LEVEL is how much is logged.<br>*alpha:* Shared: alpha logs a lot."},
		{"NESTED_SIZE", "alpha", "required", "integer", "NESTED_SIZE is how big."},
		{"TICK", "alpha", "`1s`", "duration", "TICK is how often alpha works."},
		{"WAIT", "every service", "`1s`", "duration", "WAIT bounds a wait.<br>*alpha:* Shared: alpha logs a lot."},
	}
	if !slices.Equal(got, want) {
		t.Errorf("rows:\n got %q\nwant %q", got, want)
	}
}

// A setting or knob added without a doc comment stops the generator,
// which names each one; a comment on the line embedding a struct does not
// document the struct's fields.
func TestUndocumentedSettingsAreRefused(t *testing.T) {
	t.Parallel()
	_, err := envDecls("testdata/undocumented")
	if err == nil {
		t.Fatal("env fields without a doc comment were accepted")
	}
	for _, want := range []string{"BARE_SHARED (Shared.Bare) has no doc comment", "BARE_OWN (Config.Bare) has no doc comment"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}
	if strings.Contains(err.Error(), "DOCUMENTED") {
		t.Errorf("error %q names a documented field", err)
	}

	_, err = queueKnobs("testdata/undocumented", filepath.Join("pkg", "queue"))
	if err == nil || !strings.Contains(err.Error(), "knob size (Config.Size) has no doc comment") || strings.Contains(err.Error(), "rate") {
		t.Errorf("undocumented knob: error %v", err)
	}
}

// A knob's kind, values, default and range come from its type, the
// constants of its type, DefaultConfig and its comment; comments show
// constants' values and knobs' JSON names.
func TestQueueKnobs(t *testing.T) {
	t.Parallel()
	got, err := queueKnobs("testdata/knobs", filepath.Join("pkg", "queue"))
	if err != nil {
		t.Fatal(err)
	}
	want := []knob{
		{name: "mode", kind: "string", enum: []string{"FAST", "SLOW"}, def: "SLOW", doc: "mode is FAST or SLOW."},
		{name: "rate", kind: "number", def: "2500", min: "0.5", max: "10000", doc: "rate is people per second. Valid from 0.5 to 10000."},
		{name: "size", kind: "integer", def: "0", min: "0", max: "604800", doc: "size caps the line, at most rate x 60. Valid from 0 (no cap) to\n604800."},
		{name: "startsAt", kind: "time", doc: "startsAt, when set, is the start."},
	}
	if len(got) != len(want) {
		t.Fatalf("%d knobs, want %d: %+v", len(got), len(want), got)
	}
	for i := range want {
		g, w := got[i], want[i]
		if g.name != w.name || g.kind != w.kind || !slices.Equal(g.enum, w.enum) || g.def != w.def ||
			g.min != w.min || g.max != w.max || g.doc != w.doc {
			t.Errorf("knob %d:\n got %+v\nwant %+v", i, g, w)
		}
	}
}
