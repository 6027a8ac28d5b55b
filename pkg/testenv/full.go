package testenv

import "os"

// Full reports the long form of the drills, CHAOS_FULL=1 (make chaos):
// more people and more faults, and the timing bounds a quiet machine
// meets. make test runs the short form, which asserts counts and orders
// with bounds that hold when the other core is busy.
func Full() bool { return os.Getenv("CHAOS_FULL") == "1" }

// Pick is short in the short form, long in the full one.
func Pick[T any](short, long T) T {
	if Full() {
		return long
	}
	return short
}
