package main

import (
	"errors"
	"fmt"
	"go/ast"
	"go/types"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
)

// A decl is one environment variable as one service's Config declares it.
type decl struct {
	service    string
	name       string
	def        string // envDefault
	hasDefault bool
	required   bool
	goType     string // as written: time.Duration, []string
	sep        string // of a list
	secret     bool   // json:"-": kept out of logs
	doc        string // the field's doc comment
	note       string // the comment on the line embedding the field's struct
}

// envDecls walks the Config struct of every services/*/internal/wire
// package and the structs it embeds or holds, wherever they are declared,
// and returns every field with an env tag. A field without a doc comment
// is an error: the comment is the setting's only documentation.
func envDecls(root string) ([]decl, error) {
	dirs, err := filepath.Glob(filepath.Join(root, "services", "*", "internal", "wire"))
	if err != nil {
		return nil, err
	}
	if len(dirs) == 0 {
		return nil, fmt.Errorf("no services/*/internal/wire under %s", root)
	}
	s := newSource(root)
	var out []decl
	var errs []error
	for _, dir := range dirs {
		rel, _ := filepath.Rel(root, dir)
		p, err := s.load(rel)
		if err != nil {
			return nil, err
		}
		cfg, ok := p.types["Config"]
		if !ok {
			return nil, fmt.Errorf("%s: no type Config", rel)
		}
		w := walker{s: s, service: filepath.Base(filepath.Dir(filepath.Dir(dir)))}
		w.walk(p, cfg, "", "")
		out = append(out, w.out...)
		for _, e := range w.errs {
			// A shared struct's undocumented field is reported once, not
			// once per service embedding it.
			if !slices.ContainsFunc(errs, func(x error) bool { return x.Error() == e.Error() }) {
				errs = append(errs, e)
			}
		}
	}
	return out, errors.Join(errs...)
}

// A walker collects one service's env fields.
type walker struct {
	s       *source
	service string
	out     []decl
	errs    []error
}

// walk visits t's fields: a field with an env tag is a setting; a field
// whose type is a struct of this repository is walked in turn, as
// caarlos0/env does, with its envPrefix, and the comment of an embedding
// line is kept as a note on the fields beneath it.
func (w *walker) walk(p *pkg, t typeDecl, prefix, note string) {
	st, ok := t.spec.Type.(*ast.StructType)
	if !ok {
		w.errs = append(w.errs, fmt.Errorf("%s: %s is not a struct", w.s.pos(t.spec), t.spec.Name.Name))
		return
	}
	for _, f := range st.Fields.List {
		tag := fieldTag(f)
		env, hasEnv := tag.Lookup("env")
		name, opts, _ := strings.Cut(env, ",")
		if hasEnv && name != "" {
			w.leaf(t, f, prefix+name, opts, tag, note)
			continue
		}
		q, inner, ok, err := w.s.resolve(p, t.file, f.Type)
		switch {
		case err != nil:
			w.errs = append(w.errs, fmt.Errorf("%s: %w", w.s.pos(f), err))
		case ok:
			n := note
			if len(f.Names) == 0 {
				n = strings.TrimSpace(strings.Join([]string{note, docText(f)}, " "))
			}
			w.walk(q, inner, prefix+tag.Get("envPrefix"), n)
		case len(f.Names) == 0:
			w.errs = append(w.errs, fmt.Errorf("%s: cannot find the embedded %s, which may hold env fields", w.s.pos(f), types.ExprString(f.Type)))
		}
	}
}

func (w *walker) leaf(t typeDecl, f *ast.Field, name, opts string, tag reflect.StructTag, note string) {
	if len(f.Names) != 1 {
		w.errs = append(w.errs, fmt.Errorf("%s: env %s: declare one field per variable", w.s.pos(f), name))
		return
	}
	goName := f.Names[0].Name
	doc := docText(f)
	if doc == "" {
		w.errs = append(w.errs, fmt.Errorf("%s: %s (%s.%s) has no doc comment", w.s.pos(f), name, t.spec.Name.Name, goName))
		return
	}
	def, hasDefault := tag.Lookup("envDefault")
	sep := tag.Get("envSeparator")
	if sep == "" {
		sep = ","
	}
	w.out = append(w.out, decl{
		service:    w.service,
		name:       name,
		def:        def,
		hasDefault: hasDefault,
		required:   slices.Contains(strings.Split(opts, ","), "required"),
		goType:     types.ExprString(f.Type),
		sep:        sep,
		secret:     tag.Get("json") == "-",
		doc:        subject(doc, goName, name),
		note:       note,
	})
}

func fieldTag(f *ast.Field) reflect.StructTag {
	if f.Tag == nil {
		return ""
	}
	s, err := strconv.Unquote(f.Tag.Value)
	if err != nil {
		return ""
	}
	return reflect.StructTag(s)
}
