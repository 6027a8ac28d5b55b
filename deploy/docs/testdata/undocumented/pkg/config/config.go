package config

// Shared is embedded by the service.
type Shared struct {
	// Documented has a comment.
	Documented string `env:"DOCUMENTED"`
	Bare       string `env:"BARE_SHARED"`
}
