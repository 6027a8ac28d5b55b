package queue

// Config holds a queue's knobs.
type Config struct {
	// Rate is people per second.
	Rate float64 `json:"rate"`
	Size int64   `json:"size"`
}

// DefaultConfig is a new queue's.
func DefaultConfig() Config { return Config{Rate: 1, Size: 2} }
