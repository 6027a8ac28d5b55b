package wire

import cfg "github.com/waitingroom/waitingroom/pkg/config"

// Config is beta's environment.
type Config struct {
	// Addr is where the service listens.
	Addr string `env:"ADDR" envDefault:":2"`
	cfg.Shared
}
