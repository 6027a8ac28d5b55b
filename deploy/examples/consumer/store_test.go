package main

import (
	"context"
	"errors"
	"testing"
)

// TestMemoryOnce: fn runs once per id, a failed fn is not remembered, and
// the oldest id is forgotten once size ids are remembered.
func TestMemoryOnce(t *testing.T) {
	m := NewMemory(2)
	runs := map[string]int{}
	once := func(id string, fail bool) (bool, error) {
		return m.Once(context.Background(), id, func(context.Context) error {
			runs[id]++
			if fail {
				return errors.New("database busy")
			}
			return nil
		})
	}
	for _, step := range []struct {
		id      string
		fail    bool
		wantRan bool
		wantErr bool
	}{
		{"a", false, true, false},
		{"a", false, false, false}, // duplicate
		{"b", true, false, true},   // failed: not remembered
		{"b", false, true, false},  // so the redelivery runs it
		{"b", false, false, false},
		{"c", false, true, false}, // a third id: a is forgotten
		{"b", false, false, false},
		{"c", false, false, false},
		{"a", false, true, false}, // older than the last 2: handled again
	} {
		ran, err := once(step.id, step.fail)
		if ran != step.wantRan || (err != nil) != step.wantErr {
			t.Fatalf("Once(%s, fail %v) = %v, %v; want ran %v, error %v", step.id, step.fail, ran, err, step.wantRan, step.wantErr)
		}
	}
	if want := map[string]int{"a": 2, "b": 2, "c": 1}; len(runs) != len(want) || runs["a"] != 2 || runs["b"] != 2 || runs["c"] != 1 {
		t.Errorf("runs %v, want %v", runs, want)
	}
}
