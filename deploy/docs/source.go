package main

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// modulePrefix is the import path prefix of the workspace's modules; an
// import under it names a directory under the repository root.
const modulePrefix = "github.com/waitingroom/waitingroom/"

// A source is the Go packages of the repository the generator has parsed,
// by directory. Nothing is imported or built: service-internal packages
// cannot be imported from outside their module, and parsing works for all.
type source struct {
	root string
	fset *token.FileSet
	pkgs map[string]*pkg
}

// A pkg is one parsed package: its files (without tests, sorted by name)
// and its top-level types.
type pkg struct {
	dir   string
	files []*ast.File
	types map[string]typeDecl
}

// A typeDecl is a top-level type and the file that declares it (whose
// imports its field types refer to).
type typeDecl struct {
	spec *ast.TypeSpec
	file *ast.File
}

func newSource(root string) *source {
	return &source{root: root, fset: token.NewFileSet(), pkgs: map[string]*pkg{}}
}

// load parses the package in dir (relative to the root) once.
func (s *source) load(dir string) (*pkg, error) {
	if p, ok := s.pkgs[dir]; ok {
		return p, nil
	}
	entries, err := os.ReadDir(filepath.Join(s.root, dir))
	if err != nil {
		return nil, err
	}
	p := &pkg{dir: dir, types: map[string]typeDecl{}}
	for _, e := range entries {
		name := e.Name()
		if e.IsDir() || !strings.HasSuffix(name, ".go") || strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(s.fset, filepath.Join(s.root, dir, name), nil, parser.ParseComments|parser.SkipObjectResolution)
		if err != nil {
			return nil, err
		}
		p.files = append(p.files, f)
		for _, d := range f.Decls {
			g, ok := d.(*ast.GenDecl)
			if !ok || g.Tok != token.TYPE {
				continue
			}
			for _, sp := range g.Specs {
				ts := sp.(*ast.TypeSpec)
				p.types[ts.Name.Name] = typeDecl{spec: ts, file: f}
			}
		}
	}
	if len(p.files) == 0 {
		return nil, fmt.Errorf("%s: no Go files", dir)
	}
	s.pkgs[dir] = p
	return p, nil
}

// resolve finds the type a field's type expression names: a type of the
// same package, or pkgname.Type of a package of this repository. ok is
// false for anything else (time.Duration, []string, int).
func (s *source) resolve(p *pkg, file *ast.File, expr ast.Expr) (*pkg, typeDecl, bool, error) {
	if star, ok := expr.(*ast.StarExpr); ok {
		expr = star.X
	}
	switch e := expr.(type) {
	case *ast.Ident:
		t, ok := p.types[e.Name]
		return p, t, ok, nil
	case *ast.SelectorExpr:
		x, ok := e.X.(*ast.Ident)
		if !ok {
			return nil, typeDecl{}, false, nil
		}
		path, ok := importPath(file, x.Name)
		if !ok || !strings.HasPrefix(path, modulePrefix) {
			return nil, typeDecl{}, false, nil
		}
		q, err := s.load(filepath.FromSlash(strings.TrimPrefix(path, modulePrefix)))
		if err != nil {
			return nil, typeDecl{}, false, err
		}
		t, ok := q.types[e.Sel.Name]
		if !ok {
			return nil, typeDecl{}, false, fmt.Errorf("%s has no type %s", path, e.Sel.Name)
		}
		return q, t, true, nil
	}
	return nil, typeDecl{}, false, nil
}

// importPath is the path file imports under name.
func importPath(file *ast.File, name string) (string, bool) {
	for _, imp := range file.Imports {
		path, err := strconv.Unquote(imp.Path.Value)
		if err != nil {
			continue
		}
		local := path[strings.LastIndex(path, "/")+1:]
		if imp.Name != nil {
			local = imp.Name.Name
		}
		if local == name {
			return path, true
		}
	}
	return "", false
}

// pos is where n is, relative to the root, for error messages.
func (s *source) pos(n ast.Node) string {
	p := s.fset.Position(n.Pos())
	rel, err := filepath.Rel(s.root, p.Filename)
	if err != nil {
		rel = p.Filename
	}
	return fmt.Sprintf("%s:%d", filepath.ToSlash(rel), p.Line)
}

// docText is a field's doc comment, or its line comment when it has none.
func docText(f *ast.Field) string {
	for _, c := range []*ast.CommentGroup{f.Doc, f.Comment} {
		if t := strings.TrimSpace(c.Text()); t != "" {
			return t
		}
	}
	return ""
}

// subject replaces doc's first word, the Go name it is about, with the
// name a reader of the generated docs knows it by.
func subject(doc, goName, name string) string {
	for _, after := range []string{" ", ","} {
		if rest, ok := strings.CutPrefix(doc, goName+after); ok {
			return name + after + rest
		}
	}
	return doc
}

// sortedKeys is m's keys in order.
func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
