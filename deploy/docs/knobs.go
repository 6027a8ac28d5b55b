package main

import (
	"errors"
	"fmt"
	"go/ast"
	"regexp"
	"strings"
)

// A knob is one field of a queue's Config, set through the admin API.
type knob struct {
	name     string   // the JSON name
	kind     string   // number, integer, string or time
	enum     []string // a string knob's values, from the constants of its type
	def      string   // in DefaultConfig; "" for an unset time
	min, max string   // from the comment's "Valid from A to B"; "" without one
	doc      string
}

// A knob's comment states its range as "Valid from 1 to [MaxShards]", a
// bound being a number or a constant of the package (shown as its value
// by then); the first may be followed by a remark in parentheses ("0 (no
// cap)"). A comment that starts the sentence but does not match is an
// error rather than a knob without a range.
var (
	validFrom   = regexp.MustCompile(`Valid\s+from\s+(-?[0-9]+(?:\.[0-9]+)?)(?:\s+\([^)]*\))?\s+to\s+(-?[0-9]+(?:\.[0-9]+)?)`)
	statesRange = regexp.MustCompile(`Valid\s+from`)
)

// queueKnobs reads the Config struct of the package in dir (pkg/queue):
// its fields' JSON names, types and doc comments, the defaults
// DefaultConfig gives a new queue, and the ranges the comments state. A
// field without a doc comment is an error.
func queueKnobs(root, dir string) (knobs []knob, err error) {
	s := newSource(root)
	p, err := s.load(dir)
	if err != nil {
		return nil, err
	}
	c := newConsts(p)
	cfg, ok := p.types["Config"]
	if !ok {
		return nil, fmt.Errorf("%s: no type Config", dir)
	}
	st, ok := cfg.spec.Type.(*ast.StructType)
	if !ok {
		return nil, fmt.Errorf("%s: Config is not a struct", s.pos(cfg.spec))
	}
	defaults, err := defaultConfig(p, c)
	if err != nil {
		return nil, err
	}
	// Comments name the other knobs by their Go names; readers of the API
	// know them by their JSON names.
	jsonNames := map[string]string{}
	for _, f := range st.Fields.List {
		for _, n := range f.Names {
			if name := jsonName(f, n.Name); name != "-" {
				jsonNames[n.Name] = name
			}
		}
	}
	var errs []error
	for _, f := range st.Fields.List {
		if len(f.Names) != 1 {
			errs = append(errs, fmt.Errorf("%s: declare one named knob per field", s.pos(f)))
			continue
		}
		goName := f.Names[0].Name
		k := knob{name: jsonNames[goName]}
		if k.name == "" {
			continue // json:"-": not a knob
		}
		doc := docText(f)
		if doc == "" {
			errs = append(errs, fmt.Errorf("%s: knob %s (Config.%s) has no doc comment", s.pos(f), k.name, goName))
			continue
		}
		if k.doc, err = c.substitute(doc); err != nil {
			errs = append(errs, fmt.Errorf("%s: %s: %w", s.pos(f), k.name, err))
			continue
		}
		k.doc = renameAll(k.doc, jsonNames)
		if k.kind, k.enum, err = knobKind(p, c, f.Type); err != nil {
			errs = append(errs, fmt.Errorf("%s: %s: %w", s.pos(f), k.name, err))
			continue
		}
		if statesRange.MatchString(k.doc) {
			m := validFrom.FindStringSubmatch(k.doc)
			if m == nil {
				errs = append(errs, fmt.Errorf("%s: %s: write the range as \"Valid from A to B\", each a number or a [Constant]", s.pos(f), k.name))
				continue
			}
			k.min, k.max = m[1], m[2]
		}
		k.def = defaults[goName]
		if _, set := defaults[goName]; !set && k.kind != "time" {
			k.def = zero(k.kind)
		}
		knobs = append(knobs, k)
	}
	return knobs, errors.Join(errs...)
}

// jsonName is the name encoding/json gives the field.
func jsonName(f *ast.Field, goName string) string {
	name, _, _ := strings.Cut(fieldTag(f).Get("json"), ",")
	if name == "" {
		return goName
	}
	return name
}

// knobKind is the JSON kind of a knob's Go type; a string type of the
// package takes its constants, in the order they are declared, as values.
func knobKind(p *pkg, c *consts, expr ast.Expr) (string, []string, error) {
	switch e := expr.(type) {
	case *ast.SelectorExpr:
		if x, ok := e.X.(*ast.Ident); ok && x.Name == "time" && e.Sel.Name == "Time" {
			return "time", nil, nil
		}
	case *ast.Ident:
		switch e.Name {
		case "float32", "float64":
			return "number", nil, nil
		case "int", "int32", "int64":
			return "integer", nil, nil
		case "bool":
			return "boolean", nil, nil
		case "string":
			return "string", nil, nil
		}
		if t, ok := p.types[e.Name]; ok {
			if u, ok := t.spec.Type.(*ast.Ident); ok && u.Name == "string" {
				values, err := c.ofType(e.Name)
				return "string", values, err
			}
		}
	}
	return "", nil, fmt.Errorf("no JSON kind for the Go type %s", typeString(expr))
}

// zero is the default of a knob DefaultConfig leaves out.
func zero(kind string) string {
	switch kind {
	case "number", "integer":
		return "0"
	case "boolean":
		return "false"
	}
	return ""
}

// defaultConfig evaluates the Config literal DefaultConfig returns: each
// knob it sets, formatted.
func defaultConfig(p *pkg, c *consts) (map[string]string, error) {
	for _, f := range p.files {
		for _, d := range f.Decls {
			fn, ok := d.(*ast.FuncDecl)
			if !ok || fn.Recv != nil || fn.Name.Name != "DefaultConfig" || fn.Body == nil {
				continue
			}
			for _, st := range fn.Body.List {
				ret, ok := st.(*ast.ReturnStmt)
				if !ok || len(ret.Results) != 1 {
					continue
				}
				lit, ok := ret.Results[0].(*ast.CompositeLit)
				if !ok {
					break
				}
				out := map[string]string{}
				for _, e := range lit.Elts {
					kv, ok := e.(*ast.KeyValueExpr)
					if !ok {
						return nil, errors.New("DefaultConfig: the Config literal must name its fields")
					}
					key, ok := kv.Key.(*ast.Ident)
					if !ok {
						return nil, errors.New("DefaultConfig: the Config literal must name its fields")
					}
					v, err := c.eval(kv.Value)
					if err != nil {
						return nil, fmt.Errorf("DefaultConfig: %s: %w", key.Name, err)
					}
					out[key.Name] = format(v)
				}
				return out, nil
			}
			return nil, errors.New("DefaultConfig must return a Config literal")
		}
	}
	return nil, fmt.Errorf("%s: no func DefaultConfig", p.dir)
}

// renameAll replaces every whole-word Go name in text with its JSON name.
func renameAll(text string, names map[string]string) string {
	keys := sortedKeys(names)
	quoted := make([]string, len(keys))
	for i, k := range keys {
		quoted[i] = regexp.QuoteMeta(k)
	}
	re := regexp.MustCompile(`\b(` + strings.Join(quoted, "|") + `)\b`)
	return re.ReplaceAllStringFunc(text, func(w string) string { return names[w] })
}
