package config

import "time"

// Shared is embedded by both services.
type Shared struct {
	// Level is how much is logged.
	Level string `env:"LEVEL" envDefault:"info"`
	// Keys, when set, sign things.
	Keys []string `env:"KEYS" envSeparator:";" json:"-"`
	// Wait bounds a wait.
	Wait time.Duration `env:"WAIT" envDefault:"1s"`
}
