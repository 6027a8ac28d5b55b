package order

import (
	"context"
	"errors"

	"github.com/waitingroom/waitingroom/pkg/queue"
)

// Render turns what an order request came to (the order, or why there is
// none) into the answer its client gets. The port supplies it; the answer
// is what PlaceOnce stores under an Idempotency-Key.
type Render func(Order, error) StoredAnswer

// PlaceOnce is an order request with an optional Idempotency-Key (key ""
// is none): Screen, then claim the key, then Place, then keep the answer.
//
// A request whose token fails the cheap check is answered (rendered) and
// never claims its key; the holder of a spent token retrying with a key
// gets that key's stored answer replayed. Past Screen the key is claimed:
// a key already answered is replayed, one still running fails with
// ErrIdempotencyInProgress. The answer of a final outcome (an order, or a
// refusal a retry would get again) is stored for the retries; a passing
// one (rate limited, not active yet, unavailable) frees the key, so a
// retry runs again.
//
// While this replica's probe finds Redis down, a request is answered by
// outage: a queue that fails OPEN takes orders from holders of a signed
// entry token, nobody else. A request whose own Redis call failed while
// the probe finds Redis up (a slow reply, this replica's pool used up by
// its own load) is unavailable (503 with Retry-After), never let through.
//
// It returns the answer to give and whether it is a replay. An error means
// no answer was rendered: ErrIdempotencyInProgress, or the failure to
// claim the key. Every answer rendered or replayed is one request's
// outcome for Metrics.
func (s *Service) PlaceOnce(ctx context.Context, r PlaceRequest, key string, render Render) (StoredAnswer, bool, error) {
	counted := func(o Order, err error) StoredAnswer {
		outcome := requestOutcome(err)
		if err == nil && o.Bypassed {
			outcome = outcomeBypassed
		}
		s.m.Requested(outcome)
		return render(o, err)
	}
	if key != "" {
		// Rendered, not counted: the request is counted once, below.
		r.keyed = &keyedAnswer{key: key, answer: func(o Order) StoredAnswer { return render(o, nil) }}
	}
	ans, replayed, err := s.placeOnce(ctx, r, key, counted)
	if replayed {
		s.m.Requested(outcomeReplayed)
	}
	return ans, replayed, err
}

// Malformed counts an order request its port refused before PlaceOnce (a
// body that is no order, a malformed Idempotency-Key) among the requests'
// outcomes, as invalid.
func (s *Service) Malformed() { s.m.Requested(outcomeInvalid) }

func (s *Service) placeOnce(ctx context.Context, r PlaceRequest, key string, render Render) (StoredAnswer, bool, error) {
	if s.redisKnownDown() {
		return s.outage(ctx, r, key, render)
	}
	if err := s.Screen(ctx, r); err != nil {
		if errors.Is(err, ErrTokenSpent) && key != "" {
			// Its holder retrying: replay the stored answer, if any.
			ans, found, lerr := s.repo.LookupIdempotent(ctx, r.UserID, key)
			switch {
			case lerr != nil:
				err = lerr
			case found:
				return replay(ans)
			}
		}
		return render(Order{}, err), false, nil
	}
	return s.placeKeyed(ctx, r, key, render, s.Place)
}

// placeKeyed claims the Idempotency-Key (if any), places the order with
// place and keeps the answer under the key.
func (s *Service) placeKeyed(ctx context.Context, r PlaceRequest, key string, render Render,
	place func(context.Context, PlaceRequest) (Order, error)) (StoredAnswer, bool, error) {
	if key != "" {
		ans, fresh, err := s.repo.BeginIdempotent(ctx, r.UserID, key)
		if err != nil {
			s.health.refused(r.QueueID, err)
			return StoredAnswer{}, false, err
		}
		if !fresh {
			return replay(ans)
		}
	}
	o, err := place(ctx, r)
	ans := render(o, err)
	if key != "" {
		s.keep(ctx, r.UserID, key, err, ans)
	}
	return ans, false, nil
}

func replay(ans StoredAnswer) (StoredAnswer, bool, error) {
	if !ans.Done {
		return StoredAnswer{}, false, ErrIdempotencyInProgress
	}
	return ans, true, nil
}

// keep stores the answer of a final outcome under the key, or frees the
// key after a passing one. An order's answer is in its commit already. It
// runs even when the client has gone: its retry must find the answer.
func (s *Service) keep(ctx context.Context, user, key string, err error, ans StoredAnswer) {
	ctx = context.WithoutCancel(ctx)
	var kerr error
	switch {
	case err == nil:
		return
	case final(err):
		kerr = s.repo.FinishIdempotent(ctx, user, key, ans.Status, ans.Body)
	default:
		kerr = s.repo.AbandonIdempotent(ctx, user, key)
	}
	if kerr != nil {
		s.log.Warn("idempotency record", "user", user, "err", kerr)
	}
}

// final reports whether an outcome is the request's (stored and replayed)
// or a passing condition the client should retry past: a rate limit, a
// token not active yet, an outage, a timeout, a cancel or an error nobody
// expected.
func final(err error) bool {
	var rl *RateLimitedError
	switch {
	case err == nil:
		return true
	case errors.As(err, &rl):
		return false
	case errors.Is(err, queue.ErrInvalidToken), errors.Is(err, ErrInvalidRequest), errors.Is(err, ErrSoldOut),
		errors.Is(err, ErrProductNotFound), errors.Is(err, ErrOrderNotFound), errors.Is(err, ErrDuplicateToken),
		errors.Is(err, ErrIdempotencyInProgress):
		return true
	}
	return false
}
