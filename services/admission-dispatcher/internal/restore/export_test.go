package restore

import "time"

// SetUnavailableFor sets how long h holds a delivery through an outage,
// for the tests in package restore_test.
func SetUnavailableFor(h *Handler, d time.Duration) { h.unavailableFor = d }

// UnavailableFor is how long h holds a delivery through an outage.
func UnavailableFor(h *Handler) time.Duration { return h.unavailableFor }
