package events_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/waitingroom/waitingroom/pkg/events"
)

const eventsImport = "github.com/waitingroom/waitingroom/pkg/events"

// keyUse is a routing key in the Go sources: a RoutingKey* constant of
// pkg/events, or a string literal given to a RoutingKey field.
type keyUse struct {
	pos   string // file:line
	ident string // the constant, "" for a literal
	value string // the literal's value; for a constant, filled in by check
}

var routingKeyConst = regexp.MustCompile(`^RoutingKey[A-Z]\w*$`)

// routingKeyUses parses the non-test Go files under roots (generated code,
// testdata and vendor left out) and returns every routing key they use:
// events.RoutingKeyX (under any import name; plain RoutingKeyX inside
// package events) and "literal" in `RoutingKey: "..."` or `x.RoutingKey =
// "..."`, the fields a publisher's event has.
func routingKeyUses(t *testing.T, roots ...string) []keyUse {
	t.Helper()
	var uses []keyUse
	fset := token.NewFileSet()
	for _, root := range roots {
		err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
			switch {
			case err != nil:
				return err
			case d.IsDir() && slices.Contains([]string{"testdata", "vendor", "waitingroomv1"}, d.Name()):
				return filepath.SkipDir
			case d.IsDir() || !strings.HasSuffix(p, ".go") || strings.HasSuffix(p, "_test.go"):
				return nil
			}
			f, err := parser.ParseFile(fset, p, nil, parser.SkipObjectResolution)
			if err != nil {
				t.Errorf("parse %s: %v", p, err)
				return nil
			}
			uses = append(uses, usesIn(fset, f)...)
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	return uses
}

func usesIn(fset *token.FileSet, f *ast.File) []keyUse {
	pkgName := "" // the file's name for pkg/events
	for _, im := range f.Imports {
		if path, _ := strconv.Unquote(im.Path.Value); path == eventsImport {
			pkgName = "events"
			if im.Name != nil {
				pkgName = im.Name.Name
			}
		}
	}
	var uses []keyUse
	add := func(n ast.Node, ident, value string) {
		p := fset.Position(n.Pos())
		uses = append(uses, keyUse{pos: p.Filename + ":" + strconv.Itoa(p.Line), ident: ident, value: value})
	}
	literal := func(field, value ast.Expr) {
		if id, ok := field.(*ast.Ident); !ok || id.Name != "RoutingKey" {
			return
		}
		if lit, ok := value.(*ast.BasicLit); ok && lit.Kind == token.STRING {
			s, _ := strconv.Unquote(lit.Value)
			add(lit, "", s)
		}
	}
	var visit func(n ast.Node) bool
	visit = func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.SelectorExpr:
			if x, ok := n.X.(*ast.Ident); ok && pkgName != "" && x.Name == pkgName && routingKeyConst.MatchString(n.Sel.Name) {
				add(n, n.Sel.Name, "")
			}
			ast.Inspect(n.X, visit)
			return false // Sel is a field or method, not a constant of package events
		case *ast.Ident:
			if f.Name.Name == "events" && routingKeyConst.MatchString(n.Name) {
				add(n, n.Name, "")
			}
		case *ast.KeyValueExpr:
			literal(n.Key, n.Value)
		case *ast.AssignStmt:
			for i, lhs := range n.Lhs {
				if sel, ok := lhs.(*ast.SelectorExpr); ok && i < len(n.Rhs) {
					literal(sel.Sel, n.Rhs[i])
				}
			}
		}
		return true
	}
	ast.Inspect(f, visit)
	return uses
}

// routingKeyConsts is name -> value of the RoutingKey* constants declared in
// the non-test files of dir.
func routingKeyConsts(t *testing.T, dir string) map[string]string {
	t.Helper()
	consts := map[string]string{}
	files, _ := filepath.Glob(filepath.Join(dir, "*.go"))
	for _, p := range files {
		if strings.HasSuffix(p, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(token.NewFileSet(), p, nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		for _, decl := range f.Decls {
			gd, ok := decl.(*ast.GenDecl)
			if !ok || gd.Tok != token.CONST {
				continue
			}
			for _, spec := range gd.Specs {
				vs := spec.(*ast.ValueSpec)
				for i, name := range vs.Names {
					if lit, ok := vs.Values[i].(*ast.BasicLit); ok && routingKeyConst.MatchString(name.Name) {
						consts[name.Name], _ = strconv.Unquote(lit.Value)
					}
				}
			}
		}
	}
	return consts
}

// check fills in the values of uses and returns what is wrong with them: a
// constant pkg/events does not declare, a key outside the registry.
func check(uses []keyUse, consts map[string]string, registry []string) []string {
	var problems []string
	for i, u := range uses {
		if u.ident != "" {
			v, ok := consts[u.ident]
			if !ok {
				problems = append(problems, u.pos+": events."+u.ident+" is no routing key constant of pkg/events")
				continue
			}
			uses[i].value = v
		}
		if !slices.Contains(registry, uses[i].value) {
			problems = append(problems, u.pos+": routing key "+strconv.Quote(uses[i].value)+" is not in the registry (events.RoutingKeys)")
		}
	}
	return problems
}

// TestNoUnregisteredRoutingKeyIsPublished scans services/ and pkg/: every
// routing key the code publishes (or binds) is one of the registry, which
// the AsyncAPI test holds to the channels; every constant is in the
// registry; and every key of the registry is used somewhere besides its
// declaration, so the document lists no channel nothing publishes to.
func TestNoUnregisteredRoutingKeyIsPublished(t *testing.T) {
	registry := events.RoutingKeys()
	consts := routingKeyConsts(t, ".")
	if vals := slices.Sorted(maps.Values(consts)); !slices.Equal(vals, registry) {
		t.Errorf("RoutingKey constants %q, registry %q: want the same keys", vals, registry)
	}

	uses := routingKeyUses(t, "../../services", "..")
	for _, p := range check(uses, consts, registry) {
		t.Error(p)
	}
	used := map[string]int{}
	for _, u := range uses {
		if !strings.HasPrefix(u.pos, filepath.Join("..", "events", "events.go")+":") {
			used[u.value]++
		}
	}
	for _, key := range registry {
		if used[key] == 0 {
			t.Errorf("routing key %q is used nowhere but its declaration: drop it, or say who publishes it", key)
		}
	}
	if len(uses) < 2*len(registry) {
		t.Errorf("%d uses of routing keys found in services/ and pkg/, expected more: the scan is wrong", len(uses))
	}
}

// TestRoutingKeyScanCatches runs the scan over a publisher that gets two
// routing keys wrong, and shows it names both and nothing else.
func TestRoutingKeyScanCatches(t *testing.T) {
	dir := t.TempDir()
	const src = `package publisher

import ev "github.com/waitingroom/waitingroom/pkg/events"

type Event struct{ RoutingKey string }

var (
	ok      = Event{RoutingKey: ev.RoutingKeyOrderCreated}
	literal = Event{RoutingKey: "order.cancelled"}
	unknown = Event{RoutingKey: ev.RoutingKeyOrderCancelled}
)

func set(e *Event) {
	e.RoutingKey = "token.issued"
	e.RoutingKey = "queue.paused"
}
`
	const inTest = `package publisher

var ignored = Event{RoutingKey: "not.published"}
`
	for name, text := range map[string]string{"publisher.go": src, "publisher_test.go": inTest} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	uses := routingKeyUses(t, dir)
	got := check(uses, routingKeyConsts(t, "."), events.RoutingKeys())
	file := filepath.Join(dir, "publisher.go")
	want := []string{
		file + `:9: routing key "order.cancelled" is not in the registry (events.RoutingKeys)`,
		file + `:10: events.RoutingKeyOrderCancelled is no routing key constant of pkg/events`,
		file + `:15: routing key "queue.paused" is not in the registry (events.RoutingKeys)`,
	}
	if !slices.Equal(got, want) {
		t.Errorf("problems:\n  %s\nwant:\n  %s", strings.Join(got, "\n  "), strings.Join(want, "\n  "))
	}
	if len(uses) != 5 {
		t.Errorf("%d uses found, want 5 (the test file ignored)", len(uses))
	}
}
