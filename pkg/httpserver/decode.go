package httpserver

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
)

// DecodeStrict decodes one JSON object into v (a pointer to a struct with
// json tags) as a contract, not as a guess: unknown fields, trailing data
// and field names that match a tag only by letter case are refused
// (encoding/json alone folds case, so {"QUEUEID": ...} would fill
// queueId).
func DecodeStrict(data []byte, v any) error {
	var names map[string]json.RawMessage
	if err := json.Unmarshal(data, &names); err != nil {
		return err
	}
	if names == nil {
		return errors.New("the body must be a JSON object")
	}
	known := jsonNames(reflect.TypeOf(v))
	for name := range names {
		if !known[name] {
			return fmt.Errorf("json: unknown field %q", name)
		}
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return err
	}
	if dec.More() {
		return errors.New("json: data after the object")
	}
	return nil
}

// jsonNames are the exact field names a struct type (or pointer to one)
// decodes from.
func jsonNames(t reflect.Type) map[string]bool {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	names := map[string]bool{}
	if t.Kind() != reflect.Struct {
		return names
	}
	for f := range t.Fields() {
		if !f.IsExported() {
			continue
		}
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		switch name {
		case "-":
			continue
		case "":
			name = f.Name
		}
		names[name] = true
	}
	return names
}
