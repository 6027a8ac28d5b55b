package main

import (
	"fmt"
	"go/ast"
	"go/constant"
	"go/token"
	"go/types"
	"regexp"
	"strconv"
)

// consts are a package's top-level constants, evaluated from source on
// demand: a doc comment names a bound as a doc link ("[MaxShards]") and
// the generated docs show its value, so the number is written once.
type consts struct {
	exprs map[string]ast.Expr
	types map[string]string // the declared type's name, if any
	order []string          // as declared
	vals  map[string]constant.Value
}

func newConsts(p *pkg) *consts {
	c := &consts{exprs: map[string]ast.Expr{}, types: map[string]string{}, vals: map[string]constant.Value{}}
	for _, f := range p.files {
		for _, d := range f.Decls {
			g, ok := d.(*ast.GenDecl)
			if !ok || g.Tok != token.CONST {
				continue
			}
			for _, sp := range g.Specs {
				vs := sp.(*ast.ValueSpec)
				for i, n := range vs.Names {
					c.order = append(c.order, n.Name)
					if i < len(vs.Values) {
						c.exprs[n.Name] = vs.Values[i]
					}
					if t, ok := vs.Type.(*ast.Ident); ok {
						c.types[n.Name] = t.Name
					}
				}
			}
		}
	}
	return c
}

// eval is the value of a constant expression of literals, operators and
// the package's constants. Anything else (iota, time.Hour, calls) is an
// error.
func (c *consts) eval(e ast.Expr) (constant.Value, error) {
	switch e := e.(type) {
	case *ast.BasicLit:
		if v := constant.MakeFromLiteral(e.Value, e.Kind, 0); v.Kind() != constant.Unknown {
			return v, nil
		}
	case *ast.Ident:
		return c.value(e.Name)
	case *ast.ParenExpr:
		return c.eval(e.X)
	case *ast.UnaryExpr:
		x, err := c.eval(e.X)
		if err != nil {
			return nil, err
		}
		return constant.UnaryOp(e.Op, x, 0), nil
	case *ast.BinaryExpr:
		x, err := c.eval(e.X)
		if err != nil {
			return nil, err
		}
		y, err := c.eval(e.Y)
		if err != nil {
			return nil, err
		}
		op := e.Op
		if op == token.QUO && x.Kind() == constant.Int && y.Kind() == constant.Int {
			op = token.QUO_ASSIGN // integer division
		}
		return constant.BinaryOp(x, op, y), nil
	}
	return nil, fmt.Errorf("cannot evaluate %s", typeString(e))
}

// value is the named constant's value.
func (c *consts) value(name string) (constant.Value, error) {
	if v, ok := c.vals[name]; ok {
		return v, nil
	}
	e, ok := c.exprs[name]
	if !ok {
		return nil, fmt.Errorf("%s is not a constant of the package with a value of its own", name)
	}
	c.vals[name] = constant.MakeUnknown() // a cycle ends as unknown
	v, err := c.eval(e)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	c.vals[name] = v
	return v, nil
}

// ofType is the values of the constants declared with type name, in
// declaration order.
func (c *consts) ofType(name string) ([]string, error) {
	var out []string
	for _, n := range c.order {
		if c.types[n] != name {
			continue
		}
		v, err := c.value(n)
		if err != nil {
			return nil, err
		}
		out = append(out, format(v))
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("type %s has no constants to list as its values", name)
	}
	return out, nil
}

// docLink is a Go doc link to an identifier of the same package.
var docLink = regexp.MustCompile(`\[([A-Za-z_][A-Za-z0-9_]*)\]`)

// substitute replaces each doc link to a constant with its value; a link
// to anything else stays as written.
func (c *consts) substitute(doc string) (string, error) {
	var err error
	out := docLink.ReplaceAllStringFunc(doc, func(link string) string {
		name := link[1 : len(link)-1]
		if _, ok := c.exprs[name]; !ok {
			return link
		}
		v, e := c.value(name)
		if e != nil {
			err = e
			return link
		}
		return format(v)
	})
	return out, err
}

// format writes a constant as the docs show it: a string bare, a number
// in plain decimal.
func format(v constant.Value) string {
	switch v.Kind() {
	case constant.String:
		return constant.StringVal(v)
	case constant.Float:
		f, _ := constant.Float64Val(v)
		return strconv.FormatFloat(f, 'f', -1, 64)
	}
	return v.ExactString()
}

func typeString(e ast.Expr) string { return types.ExprString(e) }
