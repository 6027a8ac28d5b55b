package queue

import "time"

// Config holds a queue's knobs.
type Config struct {
	// Mode is FAST or SLOW.
	Mode Mode `json:"mode"`
	// Rate is people per second. Valid from [MinRate] to [MaxRate].
	Rate float64 `json:"rate"`
	// Size caps the line, at most Rate x 60. Valid from 0 (no cap) to
	// [MaxSize].
	Size int64 `json:"size,omitempty"`
	// StartsAt, when set, is the start.
	StartsAt time.Time `json:"startsAt,omitzero"`
	// Hidden is not a knob.
	Hidden int `json:"-"`
}

// Mode is how fast.
type Mode string

// The modes.
const (
	Fast Mode = "FAST"
	Slow Mode = "SLOW"
)

// Bounds.
const (
	MinRate  = 0.5
	MaxRate  = 10 * thousand
	MaxSize  = 7 * 24 * 3600
	thousand = 1_000
)

// DefaultConfig is a new queue's.
func DefaultConfig() Config {
	return Config{Mode: Slow, Rate: MaxRate / 4}
}
