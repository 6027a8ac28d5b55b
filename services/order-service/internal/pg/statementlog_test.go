package pg

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"
)

// TestStatementLogMeasuresEveryStatementAndWarnsOnlyPastTheThreshold: every
// statement reaches the metric; one from 200 ms is a debug line (none when
// debug is off), one from the warning threshold a warning; the line holds
// the statement's text and never its parameters.
func TestStatementLogMeasuresEveryStatementAndWarnsOnlyPastTheThreshold(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	stmt := func() (string, int64) { return "UPDATE products SET stock = stock - $1 WHERE id = $2", 1 }
	tests := []struct {
		name   string
		level  slog.Level
		took   time.Duration
		lines  int
		prefix string
	}{
		{"fast", slog.LevelDebug, 50 * time.Millisecond, 0, ""},
		{"slow, debug on", slog.LevelDebug, 300 * time.Millisecond, 1, "level=DEBUG"},
		{"slow, debug off", slog.LevelInfo, 300 * time.Millisecond, 0, ""},
		{"past the warning", slog.LevelInfo, 2500 * time.Millisecond, 1, "level=WARN"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var out bytes.Buffer
			var seen []time.Duration
			l := statementLog{
				log:     slog.New(slog.NewTextHandler(&out, &slog.HandlerOptions{Level: tc.level})),
				observe: func(d time.Duration) { seen = append(seen, d) },
				warn:    2 * time.Second,
			}
			l.Trace(ctx, time.Now().Add(-tc.took), stmt, nil)
			if len(seen) != 1 || seen[0] < tc.took {
				t.Fatalf("the metric saw %v, want one duration of at least %v", seen, tc.took)
			}
			lines := strings.Split(strings.TrimSpace(out.String()), "\n")
			if out.Len() == 0 {
				lines = nil
			}
			if len(lines) != tc.lines {
				t.Fatalf("%d log lines %q, want %d", len(lines), out.String(), tc.lines)
			}
			if tc.lines == 1 && (!strings.HasPrefix(strings.SplitN(lines[0], " ", 2)[1], tc.prefix) ||
				!strings.Contains(lines[0], `sql="UPDATE products SET stock = stock - $1 WHERE id = $2"`) || !strings.Contains(lines[0], "rows=1")) {
				t.Fatalf("log line %q, want %s with the statement and its rows", lines[0], tc.prefix)
			}
		})
	}
	if sql, params := (statementLog{}).ParamsFilter(ctx, "SELECT $1", "user-42"); sql != "SELECT $1" || params != nil {
		t.Fatalf("ParamsFilter kept %v", params)
	}
}
