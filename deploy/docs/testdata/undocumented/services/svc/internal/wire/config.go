package wire

import "github.com/waitingroom/waitingroom/pkg/config"

// Config is the service's environment.
type Config struct {
	// The comment on the embedding line documents no field of Shared.
	config.Shared
	Bare int `env:"BARE_OWN" envDefault:"1"`
}
