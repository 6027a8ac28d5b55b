package app

import (
	"context"
	"errors"
	"time"

	"github.com/waitingroom/waitingroom/pkg/queue"
)

// Wordings keep each queue's own wording of the waiting page, per
// language (a JSON object of message key to message, checked by the page's
// handler before it is stored); redisstore.Store implements it.
type Wordings interface {
	PutTexts(ctx context.Context, q, lang string, msgs []byte, by queue.Change) (bool, error)
	DeleteTexts(ctx context.Context, q, lang string, by queue.Change) (bool, error)
	Texts(ctx context.Context, q, lang string) ([]byte, error)
	AllTexts(ctx context.Context, q string) (map[string][]byte, error)
}

// ErrNoWordings: this gateway keeps no wordings (it serves no page).
var ErrNoWordings = errors.New("this gateway serves no page")

// textsTTL is how old the wording a page loads may be: a change reaches
// every replica's pages within it.
const textsTTL = 5 * time.Second

// textsForgetAt: past this many cached wordings, the stale ones are
// dropped when the next is stored.
const textsForgetAt = 4096

// textsCache answers the pages' reads of a wording from memory: at most
// one Redis read per queue and language every textsTTL in this replica,
// however many pages load (concurrent misses share one read).
type textsCache struct {
	store Wordings
	held  *memo[[]byte]
}

func textsKey(q, lang string) string { return q + "\x00" + lang }

// WithWordings makes s keep queues' own wordings of the page in w. It
// returns s.
func (s *Service) WithWordings(w Wordings) *Service {
	s.texts = &textsCache{store: w, held: newMemo[[]byte](textsTTL, textsForgetAt)}
	return s
}

// SetTexts stores q's wording in lang (checked by the caller) and reports
// whether it replaced one; queue.ErrNotFound when q does not exist. The
// change carries its QueueChanged naming by.
func (s *Service) SetTexts(ctx context.Context, q, lang string, msgs []byte, by queue.Change) (bool, error) {
	if err := s.textsFor(q); err != nil {
		return false, err
	}
	replaced, err := s.texts.store.PutTexts(ctx, q, lang, msgs, by)
	if err == nil {
		s.texts.held.forget(textsKey(q, lang))
	}
	return replaced, err
}

// DeleteTexts removes q's wording in lang and reports whether there was
// one; the change carries its QueueChanged naming by.
func (s *Service) DeleteTexts(ctx context.Context, q, lang string, by queue.Change) (bool, error) {
	if err := s.textsFor(q); err != nil {
		return false, err
	}
	had, err := s.texts.store.DeleteTexts(ctx, q, lang, by)
	if err == nil {
		s.texts.held.forget(textsKey(q, lang))
	}
	return had, err
}

// AllTexts is q's wording in every language it has one in.
func (s *Service) AllTexts(ctx context.Context, q string) (map[string][]byte, error) {
	if err := s.textsFor(q); err != nil {
		return nil, err
	}
	if _, _, err := s.queues.Config(ctx, q); err != nil {
		return nil, err
	}
	return s.texts.store.AllTexts(ctx, q)
}

// PageTexts is q's wording in lang for its page, at most textsTTL old:
// nil when it has none.
func (s *Service) PageTexts(ctx context.Context, q, lang string) ([]byte, error) {
	if err := s.textsFor(q); err != nil {
		return nil, err
	}
	return s.texts.held.get(textsKey(q, lang), func() ([]byte, error) {
		return s.texts.store.Texts(context.WithoutCancel(ctx), q, lang)
	})
}

func (s *Service) textsFor(q string) error {
	if !queue.ValidID(q) {
		return ErrInvalidQueueID
	}
	if s.texts == nil {
		return ErrNoWordings
	}
	return nil
}
