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
	// OpsAddr is the ops listener: /metrics, /healthz, /readyz (a 503 says
	// which checks failed and why) and, when PPROF_ENABLED, /debug/pprof/,
	// for Prometheus, probes and operators. Keep it off the public network.
	// Always on; tests use 127.0.0.1:0 and read the bound address.
	OpsAddr string `env:"OPS_ADDR" envDefault:":9083"`
	config.HTTP
	config.Log
	config.Redis
	config.AMQP
	// Tick is the admission period, from 10ms to 10s. At tens of thousands
	// of admissions a second, 50ms halves each tick's script and the wait of
	// the people it admits (docs/SCALING.md, "Admission").
	Tick time.Duration `env:"DISPATCH_TICK" envDefault:"100ms"`
	// Lease is the per-queue leadership lease, at least three ticks, renewed
	// every third of it. A standby takes over within lease + tick after a
	// leader dies (600ms + 100ms: a SIGKILLed leader's queue admits again
	// within a second); fencing makes a short lease safe.
	Lease time.Duration `env:"DISPATCH_LEASE" envDefault:"600ms"`
	// OutboxMaxBacklog holds a queue's admission while its outbox has this
	// many events the broker has not confirmed, so a long broker outage
	// cannot fill Redis: nobody in that queue is admitted
	// (waitingroom_dispatcher_admission_held{queue,reason} is 1, a warning
	// is logged, and GET /admin/v1/queues/{q} shows admissionHeld:
	// OUTBOX_BACKLOG) until the relay has drained it; nothing is dropped.
	// 0 turns the bound off.
	OutboxMaxBacklog int64 `env:"OUTBOX_MAX_BACKLOG" envDefault:"100000"`
	// TokenEvents is how admissions are published: "each", one TokenIssued
	// message a person (routing key token.issued); "batch", one
	// TokensIssued message (tokens.issued) with a queue's admissions of a
	// relay round, in their order. One message a person costs the broker a
	// message each (about 11,000 a second with confirms on two cores, make
	// bench); batch is for a queue admitting more than that. Consumers of
	// token.issued (the notification-service takes both) must take
	// tokens.issued before a deployment switches to batch.
	TokenEvents string `env:"TOKEN_EVENTS" envDefault:"each"`
	// Queues limits this deployment to some queue ids, comma-separated
	// (sharding); empty, it serves all.
	Queues []string `env:"DISPATCH_QUEUES"`
	// InstanceID names this replica in leases (the lease owner id); unset,
	// the hostname (the pod's name in Kubernetes) and a random suffix.
	InstanceID string `env:"INSTANCE_ID"`
	// OrderFailed: the dispatcher consumes OrderFailed from this queue and
	// restores the failed orders' tokens.
	config.OrderFailed
	// EntryTokens: the dispatcher signs the entry tokens its ticks hand out
	// with ENTRY_TOKEN_KEYS.
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
	if c.TokenEvents != TokenEventsEach && c.TokenEvents != TokenEventsBatch {
		errs = append(errs, fmt.Errorf("TOKEN_EVENTS must be %q or %q, not %q", TokenEventsEach, TokenEventsBatch, c.TokenEvents))
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
