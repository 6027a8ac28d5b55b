// Package wire builds the admission-dispatcher from its configuration.
package wire

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/waitingroom/waitingroom/pkg/config"
	"github.com/waitingroom/waitingroom/pkg/queue"
)

// Config is the admission-dispatcher's environment.
type Config struct {
	// OpsAddr is the dispatcher's only listener (it serves no API):
	// /metrics, /healthz, /readyz and pprof when PPROF_ENABLED.
	OpsAddr string `env:"OPS_ADDR" envDefault:":9083"`
	config.HTTP
	config.Log
	config.Redis
	config.AMQP
	// Tick is the admission period.
	Tick time.Duration `env:"DISPATCH_TICK" envDefault:"100ms"`
	// Lease is the per-queue leadership lease; a standby takes over within
	// lease + tick after a leader dies (600ms + 100ms: a killed leader's
	// queue admits again within a second). Renewed every third of it.
	Lease time.Duration `env:"DISPATCH_LEASE" envDefault:"600ms"`
	// OutboxMaxBacklog holds a queue's admission while its outbox has this
	// many events the broker has not confirmed, so a long broker outage
	// cannot fill Redis; 0 turns the bound off.
	OutboxMaxBacklog int64 `env:"OUTBOX_MAX_BACKLOG" envDefault:"100000"`
	// Queues limits this deployment to some queue ids (sharding); empty = all.
	Queues []string `env:"DISPATCH_QUEUES"`
	// InstanceID names this replica in leases; defaults to hostname + random.
	InstanceID string `env:"INSTANCE_ID"`
	// OrderFailed names the quorum queue OrderFailed is consumed from and
	// how often one is delivered before it is dead-lettered.
	config.OrderFailed
	// EntryTokens signs the tokens the ticks hand out (ENTRY_TOKEN_KEYS).
	config.EntryTokens
}

// Validate checks what env tags cannot.
func (c *Config) Validate() error {
	errs := []error{c.HTTP.Check()}
	if c.Tick < 10*time.Millisecond || c.Tick > 10*time.Second {
		errs = append(errs, errors.New("DISPATCH_TICK must be between 10ms and 10s"))
	}
	if c.Lease < 3*c.Tick {
		errs = append(errs, errors.New("DISPATCH_LEASE must be at least three ticks (it must outlast the worst tick)"))
	}
	if c.OutboxMaxBacklog < 0 {
		errs = append(errs, errors.New("OUTBOX_MAX_BACKLOG must be 0 (no bound) or positive"))
	}
	for _, q := range c.Queues {
		if !queue.ValidID(q) {
			errs = append(errs, fmt.Errorf("DISPATCH_QUEUES: %q is not a valid queue id", q))
		}
	}
	errs = append(errs, c.OrderFailed.Check())
	return errors.Join(errs...)
}

// owner is this replica's lease owner id: unique per process, readable in
// the lock value (hostname = pod name in Kubernetes).
func (c *Config) owner() string {
	if c.InstanceID != "" {
		return c.InstanceID
	}
	host, _ := os.Hostname()
	var b [4]byte
	_, _ = rand.Read(b[:])
	return host + "-" + hex.EncodeToString(b[:])
}
