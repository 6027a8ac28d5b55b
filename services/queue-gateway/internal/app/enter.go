package app

import (
	"context"
	"fmt"

	"github.com/waitingroom/waitingroom/pkg/challenge"
	"github.com/waitingroom/waitingroom/pkg/queue"
)

// Enter gives user a place in line q, returns their token if they hold one,
// or fails with queue.ErrNotFound, queue.ErrClosed or queue.ErrFull. On a
// queue that asks new entrants for a proof of work, solution is the solved
// challenge (X-Enter-Challenge): without one a new entrant gets
// queue.ErrChallengeRequired; a malformed, forged, expired or unsolved one
// is refused with an error wrapping queue.ErrChallengeFailed before the
// store is asked, whoever the caller is. Every outcome is counted
// (Metrics.Entered). While Redis does not answer, a queue that fails OPEN
// answers the BYPASS standing (see bypass).
func (s *Service) Enter(ctx context.Context, q, user, solution string) (queue.Standing, error) {
	st, proved, err := s.enter(ctx, q, user, solution)
	st = s.seen(q, user, st, err)
	st, err = s.bypass(q, user, true, proved, st, err)
	s.m.Entered(outcome(st, err))
	return st, err
}

// enter is Enter before the outage is looked at; proved reports a solution
// that passed every check but its single use (which only the store can
// record), at the queue's difficulty as last read.
func (s *Service) enter(ctx context.Context, q, user, solution string) (st queue.Standing, proved bool, err error) {
	if err := checkIDs(q, user); err != nil {
		return queue.Standing{}, false, err
	}
	var proof queue.Proof
	if solution != "" {
		p, err := s.signer.Check(q, user, solution)
		if err != nil {
			return queue.Standing{}, false, fmt.Errorf("%w: %w", queue.ErrChallengeFailed, err)
		}
		proof = queue.Proof{ID: p.ID, Bits: p.Bits, ExpiresAt: p.ExpiresAt}
		if s.configs != nil {
			cfg, ok := s.configs.Get(q)
			proved = ok && int64(p.Bits) >= cfg.PowDifficultyBits
		}
	}
	st, err = s.line.EnterWithProof(ctx, q, user, proof)
	return s.withTicket(q, user, st), proved, err
}

// Challenge issues user an enter challenge for queue q at the queue's
// current difficulty. It fails with ErrChallengeNotRequired when the queue
// asks for none.
func (s *Service) Challenge(ctx context.Context, q, user string) (challenge.Challenge, error) {
	if err := checkIDs(q, user); err != nil {
		return challenge.Challenge{}, err
	}
	kind, bits, err := s.line.Challenge(ctx, q)
	if cfg, open := s.failsOpen(q, err); open && err != nil {
		// Redis is down and q fails OPEN: an enter with a solution gets a
		// pass, so the challenge is issued at the difficulty last read.
		kind, bits, err = cfg.EnterChallenge, cfg.PowDifficultyBits, nil
	}
	if err != nil {
		return challenge.Challenge{}, err
	}
	if kind != queue.ChallengeProofOfWork {
		return challenge.Challenge{}, ErrChallengeNotRequired
	}
	ch, err := s.signer.Issue(q, user, int(bits))
	if err == nil {
		s.m.ChallengeIssued()
	}
	return ch, err
}

// Position tells user where they stand in q; every outcome is counted
// (Metrics.Positioned), BYPASS as Enter's.
//
// tk is the user's queue ticket, or "". A ticket not issued to user for q
// is refused (ErrTicketInvalid) before anything is read. A valid one whose
// place is far from the front is answered from the admission frontier,
// without the store; at or near the front (or without a ticket) the store
// answers, exactly, and a WAITING answer carries a ticket for next time.
func (s *Service) Position(ctx context.Context, q, user, tk string) (queue.Standing, error) {
	st, err := s.position(ctx, q, user, tk)
	st = s.seen(q, user, st, err)
	st, err = s.bypass(q, user, false, false, st, err)
	s.m.Positioned(outcome(st, err))
	return st, err
}

// PositionFromFrontier is Position for the one case that needs no store:
// a valid ticket whose place the admission frontier can tell. It answers
// (and counts) only then; false means "ask Position", which decides and
// counts everything else (a refused ticket included).
func (s *Service) PositionFromFrontier(q, user, tk string) (queue.Standing, bool) {
	if checkIDs(q, user) != nil {
		return queue.Standing{}, false
	}
	st, ok, err := s.fromFrontier(q, user, tk)
	if !ok || err != nil {
		return queue.Standing{}, false
	}
	st = s.seen(q, user, st, nil)
	s.m.Positioned(outcome(st, nil))
	return st, true
}

// fromFrontier answers user's poll with ticket tk from q's admission
// frontier when it can (ok, the read counted); err when tk was not issued
// to user for q. Without tickets or a ticket it answers nothing. The
// answer's ticket is tk re-signed with the first key when another key
// signed it: handed back as it came, a ticket of a key being rotated out
// would be refused, once that key is dropped, at the holder's next poll.
func (s *Service) fromFrontier(q, user, tk string) (queue.Standing, bool, error) {
	if tk == "" || s.tickets == nil {
		return queue.Standing{}, false, nil
	}
	place, current, err := s.tickets.CheckCurrent(q, user, tk)
	if err != nil {
		return queue.Standing{}, false, fmt.Errorf("%w: %w", ErrTicketInvalid, err)
	}
	if s.frontiers == nil {
		return queue.Standing{}, false, nil
	}
	st, ok := queue.StandingOf(s.frontiers, q, user, place.Generation, place.Seq)
	if !ok {
		return queue.Standing{}, false, nil
	}
	st.Ticket = current
	s.m.PositionRead(readFrontier)
	return st, true, nil
}

func (s *Service) position(ctx context.Context, q, user, tk string) (queue.Standing, error) {
	if err := checkIDs(q, user); err != nil {
		return queue.Standing{}, err
	}
	if st, ok, err := s.fromFrontier(q, user, tk); ok || err != nil {
		return st, err
	}
	s.m.PositionRead(readStore)
	st, err := s.line.Position(ctx, q, user)
	return s.withTicket(q, user, st), err
}

// Leave takes user out of line q. Leaving twice is not an error.
func (s *Service) Leave(ctx context.Context, q, user string) error {
	if err := checkIDs(q, user); err != nil {
		return err
	}
	_, err := s.line.Leave(ctx, q, user)
	return err
}
