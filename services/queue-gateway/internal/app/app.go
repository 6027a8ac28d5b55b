// Package app holds the queue-gateway's use cases: enter, position, leave and
// the queue admin operations. It checks the input and applies the domain rules;
// the store adapter does the atomic work.
package app

import (
	"context"
	"errors"
	"fmt"

	"github.com/waitingroom/waitingroom/pkg/challenge"
	"github.com/waitingroom/waitingroom/pkg/queue"
)

// Store is the persistence the gateway needs. redisstore.Store implements it.
type Store interface {
	EnterWithProof(ctx context.Context, q, user string, proof queue.Proof) (queue.Standing, error)
	Position(ctx context.Context, q, user string) (queue.Standing, error)
	Leave(ctx context.Context, q, user string) (bool, error)
	UpdateConfig(ctx context.Context, q string, update func(cur queue.Config, exists bool) (queue.Config, error)) (queue.Config, bool, error)
	Config(ctx context.Context, q string) (queue.Config, queue.Stats, error)
	// Challenge reads q's enter challenge and difficulty, in one cheap read.
	Challenge(ctx context.Context, q string) (queue.EnterChallenge, int64, error)
	Close(ctx context.Context, q string) (int64, error)
	Unregister(ctx context.Context, q string) (bool, error)
	Queues(ctx context.Context) ([]string, error)
	// Waiting reads the line length of each of ids.
	Waiting(ctx context.Context, ids []string) (map[string]int64, error)
}

// Input errors.
var (
	ErrInvalidQueueID = errors.New("invalid queue id")
	ErrInvalidUserID  = errors.New("invalid user id")
	// ErrChallengeNotRequired: a challenge was asked of a queue that
	// takes entrants without one.
	ErrChallengeNotRequired = errors.New("this queue asks for no enter challenge")
)

// InvalidConfigError lists every bad knob of a configuration request.
type InvalidConfigError struct {
	Fields []queue.FieldError
}

func (e *InvalidConfigError) Error() string {
	return fmt.Sprintf("invalid queue configuration (%d bad fields)", len(e.Fields))
}

// Service runs the gateway's use cases; every port (HTTP, the queue length
// gauge) reaches the store and the limiters only through it.
type Service struct {
	store   Store
	signer  *challenge.Signer
	limits  Limits
	configs Configs
	m       Metrics
}

// New returns a Service over store; signer issues and checks the enter
// challenges of queues that ask for one. The limits may be nil (off).
// configs, the queue configurations kept in memory, lets a queue that fails
// OPEN answer BYPASS while Redis is down; nil answers every outage with
// queue.ErrUnavailable. A nil m records nothing.
func New(store Store, signer *challenge.Signer, limits Limits, configs Configs, m Metrics) (*Service, error) {
	if store == nil || signer == nil {
		return nil, errors.New("app: store and challenge signer are required")
	}
	if m == nil {
		m = nopMetrics{}
	}
	return &Service{store: store, signer: signer, limits: limits, configs: configs, m: m}, nil
}

func checkIDs(q, user string) error {
	if !queue.ValidID(q) {
		return ErrInvalidQueueID
	}
	if !queue.ValidUserID(user) {
		return ErrInvalidUserID
	}
	return nil
}
