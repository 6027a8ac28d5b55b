// Command docs writes the configuration reference from the code that
// declares the settings, so that each is documented once, in a Go doc
// comment: docs/CONFIGURATION.md (every environment variable, every queue
// knob, the tracing variables), the QueueKnobs schema of the
// queue-gateway's OpenAPI document and the knobs the operators' console
// shows (their meaning and limits). `make docs` runs it from the
// repository root; its test fails while what it would write differs from
// what is committed.
package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
)

// The files the generator writes, relative to the repository root.
const (
	configurationMD = "docs/CONFIGURATION.md"
	gatewayOpenAPI  = "services/queue-gateway/internal/httpapi/openapi.yaml"
	consoleKnobs    = "services/queue-gateway/internal/web/static/console/knobs.json"
)

func main() {
	root := flag.String("root", ".", "the repository root")
	flag.Parse()
	if err := realMain(*root); err != nil {
		fmt.Fprintln(os.Stderr, "docs:", err)
		os.Exit(1)
	}
}

// realMain writes each generated file that differs from what is there.
func realMain(root string) error {
	files, err := generate(root)
	if err != nil {
		return err
	}
	for _, f := range files {
		path := filepath.Join(root, f.path)
		if old, err := os.ReadFile(path); err == nil && bytes.Equal(old, f.data) {
			continue
		}
		if err := os.WriteFile(path, f.data, 0o644); err != nil {
			return err
		}
		fmt.Println("wrote", f.path)
	}
	return nil
}

// A file is one generated file: its path under the root and its content.
type file struct {
	path string
	data []byte
}

// generate returns every generated file as it should read now. It fails
// on a setting or knob without a doc comment.
func generate(root string) ([]file, error) {
	decls, envErr := envDecls(root)
	knobs, knobErr := queueKnobs(root, filepath.Join("pkg", "queue"))
	if err := errors.Join(envErr, knobErr); err != nil {
		return nil, err
	}
	vars, err := variables(decls)
	if err != nil {
		return nil, err
	}
	tracing, err := packageDoc(root, filepath.Join("pkg", "telemetry"))
	if err != nil {
		return nil, err
	}
	api, err := os.ReadFile(filepath.Join(root, gatewayOpenAPI))
	if err != nil {
		return nil, err
	}
	if api, err = spliceKnobs(api, knobs); err != nil {
		return nil, fmt.Errorf("%s: %w", gatewayOpenAPI, err)
	}
	return []file{
		{configurationMD, markdown(vars, services(decls), knobs, tracing)},
		{gatewayOpenAPI, api},
		{consoleKnobs, knobsJSON(knobs)},
	}, nil
}

// services is the names of the services decls come from, sorted.
func services(decls []decl) []string {
	set := map[string]bool{}
	for _, d := range decls {
		set[d.service] = true
	}
	return sortedKeys(set)
}

// packageDoc is the package comment of the package in dir.
func packageDoc(root, dir string) (string, error) {
	p, err := newSource(root).load(dir)
	if err != nil {
		return "", err
	}
	for _, f := range p.files {
		if f.Doc != nil {
			return f.Doc.Text(), nil
		}
	}
	return "", fmt.Errorf("%s has no package comment", dir)
}

// knobsJSON is the knobs as the console reads them: name, kind, values,
// default, range and meaning, in the Config struct's order.
func knobsJSON(knobs []knob) []byte {
	type entry struct {
		Name    string   `json:"name"`
		Kind    string   `json:"kind"`
		Enum    []string `json:"enum,omitempty"`
		Default string   `json:"default,omitempty"`
		Min     string   `json:"min,omitempty"`
		Max     string   `json:"max,omitempty"`
		Doc     string   `json:"doc"`
	}
	out := make([]entry, len(knobs))
	for i, k := range knobs {
		out[i] = entry{k.name, k.kind, k.enum, k.def, k.min, k.max, k.doc}
	}
	b, _ := json.MarshalIndent(out, "", "  ")
	return append(b, '\n')
}
