package main

import (
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"strings"
	"time"
)

// Figures are what make bench measured, by the names deploy/bench/bench.sh
// gives them (docs/benchmarks.json, a flat object of numbers).
type Figures map[string]float64

// needed are the figures the plan is made of, each with what it is, so a
// missing one can be named.
var needed = map[string]string{
	"cores":       "cores of the bench machine",
	"e_rps":       "gateway POST enter, requests a second",
	"p_rps":       "gateway GET position without a ticket, requests a second",
	"gw_cpu_pct":  "gateway CPU during the profiled position run, per cent of one core",
	"gw_cpu_rps":  "requests a second during the profiled position run",
	"big_cpu":     "gateway CPU per 1,000 ticket polls, ms",
	"t_cpp":       "Redis commands a ticket poll",
	"t_rps":       "ticket polls a second through one gateway",
	"ev_rps":      "redis-benchmark EVALSHA position.lua, calls a second",
	"zr_rps":      "redis-benchmark ZRANK, calls a second",
	"ra0":         "admissions a second on one Redis (BenchmarkAdmitReplicated, replicas=0)",
	"mem_per":     "Redis bytes a waiting person (ZADD only)",
	"big_mem_per": "Redis bytes a person in a line of a million",
	"sh1_busy":    "busiest master's CPU an enter, one line, µs",
	"sh3_busy":    "busiest master's CPU an enter, three lines, µs",
	"sh1_cpu":     "all masters' CPU an enter, one line, µs",
	"sh3_cpu":     "all masters' CPU an enter, three lines, µs",
	"best":        "highest admission rate one leader sustains",
	"hot_group":   "orders a second on one product row, group commit",
	"hot_alone":   "orders a second on one product row, a transaction an order",
	"pg_tps":      "pgbench conditional UPDATE of one row, transactions a second",
	"sse_rss":     "RSS bytes an SSE stream",
}

// loadFigures reads path and checks that every needed figure is there and
// positive.
func loadFigures(path string) (Figures, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("figures: %w (make bench writes docs/benchmarks.json)", err)
	}
	var f Figures
	if err := json.Unmarshal(data, &f); err != nil {
		return nil, fmt.Errorf("figures: %s is not a flat JSON object of numbers: %w", path, err)
	}
	if err := f.check(); err != nil {
		return nil, fmt.Errorf("figures: %s: %w", path, err)
	}
	return f, nil
}

// check names every needed figure that is missing or not above zero.
func (f Figures) check() error {
	var bad []string
	for name, what := range needed {
		if v, ok := f[name]; !ok || v <= 0 {
			bad = append(bad, fmt.Sprintf("%s (%s)", name, what))
		}
	}
	if len(bad) == 0 {
		return nil
	}
	slices.Sort(bad)
	return fmt.Errorf("missing or not above zero, re-run make bench or add them: %s", strings.Join(bad, "; "))
}

// measured is when the figures were measured, if they say.
func (f Figures) measured() string {
	if s := f["measured_unix"]; s > 0 {
		return time.Unix(int64(s), 0).UTC().Format("2006-01-02 15:04 UTC")
	}
	return "at an unrecorded time"
}
