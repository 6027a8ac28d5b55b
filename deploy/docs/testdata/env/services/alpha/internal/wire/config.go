package wire

import (
	"time"

	"github.com/waitingroom/waitingroom/pkg/config"
)

// Config is alpha's environment.
type Config struct {
	// Addr is where the service listens.
	Addr string `env:"ADDR" envDefault:":1"`
	// Shared: alpha logs a lot.
	config.Shared
	local
	// Nested holds prefixed settings.
	Nested *nested `envPrefix:"NESTED_"`
	// Started is not a setting.
	Started time.Time
}

type local struct {
	// Tick is how often alpha works.
	Tick time.Duration `env:"TICK" envDefault:"1s"`
}

type nested struct {
	// Size is how big.
	Size int `env:"SIZE,required"`
}
