package app

import (
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/waitingroom/waitingroom/pkg/grant"
	"github.com/waitingroom/waitingroom/pkg/queue"
	"github.com/waitingroom/waitingroom/pkg/throttle"
)

// Configs are the queue configurations the gateway keeps in memory, so it
// knows a queue's fail mode while Redis cannot be reached, and whether it
// cannot: its refreshes are this replica's health probe of Redis.
// redisstore.ConfigCache implements it.
type Configs interface {
	Get(q string) (queue.Config, bool)
	// Reachable is false only while the probe finds Redis down (several
	// failures in a row over a window): never for one request's error.
	Reachable() bool
}

// WithPasses makes s hand out passes, entry tokens signed by signer
// (ENTRY_TOKEN_KEYS, the dispatcher's list), with a queue's BYPASS
// standing: what its holder orders with while Redis is down. Without
// passes a queue that fails OPEN answers its outages with the error, as
// one that fails CLOSED. It returns s.
func (s *Service) WithPasses(signer *grant.Signer) *Service {
	if signer != nil {
		s.passes = &passBook{signer: signer, held: map[string]queue.Token{}}
	}
	return s
}

// bypass answers a request on q that the store could not serve, while
// this replica's probe finds Redis down and q is known to fail OPEN: the
// BYPASS standing with a pass (go straight to the order form and order
// with it) instead of the error. Everything else, a CLOSED or unknown
// queue, one request's error while Redis is up, keeps its error: the 503.
//
// A queue that fails OPEN still refuses unless queue.Config.Bypasses: a
// PAUSED one lets nobody through, one whose start time is ahead has not
// begun selling (nobody skips its pre-queue), and a CLOSED one takes no
// new entrant (enter says so: 409). A queue that asks new entrants for a
// proof of work gives a pass only to an enter with a valid solution
// (proved; checked without Redis, so it may be used more than once) or to
// someone this replica gave one already: an enter without one is 428
// challenge-required, a poll keeps its 503.
func (s *Service) bypass(q, user string, entering, proved bool, st queue.Standing, err error) (queue.Standing, error) {
	cfg, ok := s.failsOpen(q, err)
	if !ok {
		return st, err
	}
	now := time.Now()
	if entering && cfg.State == queue.Closed {
		return queue.Standing{}, queue.ErrClosed
	}
	if !cfg.Bypasses(now) || s.passes == nil {
		return st, err
	}
	pass, held := s.passes.holding(q, user, now)
	if !held {
		if cfg.EnterChallenge == queue.ChallengeProofOfWork && !proved {
			if entering {
				return queue.Standing{}, queue.ErrChallengeRequired
			}
			return st, err
		}
		var perr error
		if pass, perr = s.passes.give(q, user, cfg, now); perr != nil {
			return st, fmt.Errorf("%w: %w", queue.ErrUnavailable, perr)
		}
	}
	out := queue.BypassStanding(q, cfg)
	out.Token = &pass
	return out, nil
}

// failsOpen reports whether err means Redis did not answer, this replica's
// probe finds Redis down, and q, as last read, fails OPEN; it returns q's
// configuration when so.
func (s *Service) failsOpen(q string, err error) (queue.Config, bool) {
	if s.configs == nil || !errors.Is(err, queue.ErrUnavailable) || s.configs.Reachable() {
		return queue.Config{}, false
	}
	cfg, ok := s.configs.Get(q)
	return cfg, ok && cfg.FailMode == queue.FailOpen
}

// errPassesUsedUp: this replica has handed out its share of a queue's
// admission rate for now, or holds as many passes as it keeps.
var errPassesUsedUp = errors.New("no pass to give right now")

// maxHeldPasses bounds the passes a replica remembers (about 100 bytes
// each): past it, no new pass is given until some expire.
const maxHeldPasses = 200_000

// passBook gives passes while Redis is down: per queue at most the
// queue's admission rate from this replica (throttle.Paces, as the
// order-service's bypassed orders: n replicas give n times the rate), and
// to a person who asks again the pass they were given (until it expires),
// so polling does not use the rate up.
type passBook struct {
	signer *grant.Signer
	paces  throttle.Paces

	mu   sync.Mutex
	held map[string]queue.Token // by queue "\x00" user
}

func (b *passBook) holding(q, user string, now time.Time) (queue.Token, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	t, ok := b.held[q+"\x00"+user]
	return t, ok && now.Before(t.ExpiresAt)
}

func (b *passBook) give(q, user string, cfg queue.Config, now time.Time) (queue.Token, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if len(b.held) >= maxHeldPasses {
		for k, t := range b.held {
			if !now.Before(t.ExpiresAt) {
				delete(b.held, k)
			}
		}
		if len(b.held) >= maxHeldPasses {
			return queue.Token{}, errPassesUsedUp
		}
	}
	if b.paces.Take(q, cfg.AdmissionRatePerSec, now) > 0 {
		return queue.Token{}, errPassesUsedUp
	}
	gs, err := b.signer.Grants(q, 0, 1, now)
	if err != nil {
		return queue.Token{}, err
	}
	t := queue.Token{Secret: gs[0].Secret, ID: gs[0].TokenID, ActivateAt: now.UTC(),
		ExpiresAt: now.Add(time.Duration(cfg.TokenTTLSeconds) * time.Second).UTC()}
	b.held[q+"\x00"+user] = t
	return t, nil
}
