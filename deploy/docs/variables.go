package main

import (
	"fmt"
	"slices"
	"strings"
)

// A variable is one environment variable with its declaration in each
// service that reads it, by service name.
type variable struct {
	name  string
	decls []decl
}

// variables groups decls by name, sorted. A variable means one thing
// everywhere, so its type must be the same in every service; its default
// and comment may differ.
func variables(decls []decl) ([]variable, error) {
	by := map[string][]decl{}
	for _, d := range decls {
		by[d.name] = append(by[d.name], d)
	}
	var out []variable
	for _, name := range sortedKeys(by) {
		ds := by[name]
		slices.SortFunc(ds, func(a, b decl) int { return strings.Compare(a.service, b.service) })
		for _, d := range ds[1:] {
			if d.goType != ds[0].goType || d.sep != ds[0].sep || d.secret != ds[0].secret {
				return nil, fmt.Errorf("%s is %s in %s but %s in %s", name, kind(d), d.service, kind(ds[0]), ds[0].service)
			}
			if d.service == ds[0].service {
				return nil, fmt.Errorf("%s is declared twice in %s", name, d.service)
			}
		}
		out = append(out, variable{name: name, decls: ds})
	}
	return out, nil
}

// A group is the services that share one value of something.
type group struct {
	value    string
	services []string
}

// groups splits ds by value, in the order of each group's first service.
func groups(ds []decl, value func(decl) string) []group {
	var out []group
	for _, d := range ds {
		v := value(d)
		i := slices.IndexFunc(out, func(g group) bool { return g.value == v })
		if i < 0 {
			out = append(out, group{value: v})
			i = len(out) - 1
		}
		out[i].services = append(out[i].services, d.service)
	}
	return out
}

// kind is the variable's type as an operator writes it.
func kind(d decl) string {
	var k string
	switch d.goType {
	case "string":
		k = "string"
	case "bool":
		k = "true or false"
	case "int", "int64":
		k = "integer"
	case "time.Duration":
		k = "duration"
	case "[]string":
		k = fmt.Sprintf("list (%q-separated)", d.sep)
	default:
		k = d.goType
	}
	if d.secret {
		k += ", secret"
	}
	return k
}

// defaultOf is what a service uses when the variable is unset.
func defaultOf(d decl) string {
	switch {
	case d.required:
		return "required"
	case !d.hasDefault:
		return "unset"
	case d.def == "":
		return "empty"
	}
	return "`" + d.def + "`"
}
