package queue

import "time"

// Bypasses reports whether a queue configured c lets people order without
// an entry token while Redis cannot be reached, at now: it fails OPEN, it
// is OPEN (a paused queue lets nobody through, a closed one takes nobody
// new), and its start time, if any, has come (nobody skips a pre-queue).
// Every service asks this of the configuration it keeps in memory.
func (c Config) Bypasses(now time.Time) bool {
	return c.FailMode == FailOpen && c.State == Open && !c.StartsAt.After(now)
}

// BypassStanding is what anyone in queue q (configured cfg) is told while
// Redis cannot be reached and q fails OPEN: go straight to the order form,
// where each order-service replica holds q's orders to its admission rate.
func BypassStanding(q string, cfg Config) Standing {
	return Standing{QueueID: q, State: Bypass, QueueState: cfg.State, ConfiguredRate: cfg.AdmissionRatePerSec}
}
