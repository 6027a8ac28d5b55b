package app

import (
	"context"
	"errors"
	"sync"
	"time"

	"golang.org/x/sync/singleflight"

	"github.com/waitingroom/waitingroom/pkg/queue"
)

// Wordings keep each queue's own wording of the waiting page, per
// language (a JSON object of message key to message, checked by the page's
// handler before it is stored); redisstore.Store implements it.
type Wordings interface {
	PutTexts(ctx context.Context, q, lang string, msgs []byte) (bool, error)
	DeleteTexts(ctx context.Context, q, lang string) (bool, error)
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
	now   func() time.Time
	sf    singleflight.Group

	mu   sync.Mutex
	held map[string]heldTexts
}

type heldTexts struct {
	msgs []byte
	at   time.Time
}

// WithWordings makes s keep queues' own wordings of the page in w. It
// returns s.
func (s *Service) WithWordings(w Wordings) *Service {
	s.texts = &textsCache{store: w, now: time.Now, held: map[string]heldTexts{}}
	return s
}

// SetTexts stores q's wording in lang (checked by the caller) and reports
// whether it replaced one; queue.ErrNotFound when q does not exist.
func (s *Service) SetTexts(ctx context.Context, q, lang string, msgs []byte) (bool, error) {
	if err := s.textsFor(q); err != nil {
		return false, err
	}
	replaced, err := s.texts.store.PutTexts(ctx, q, lang, msgs)
	if err == nil {
		s.texts.forget(q, lang)
	}
	return replaced, err
}

// DeleteTexts removes q's wording in lang and reports whether there was one.
func (s *Service) DeleteTexts(ctx context.Context, q, lang string) (bool, error) {
	if err := s.textsFor(q); err != nil {
		return false, err
	}
	had, err := s.texts.store.DeleteTexts(ctx, q, lang)
	if err == nil {
		s.texts.forget(q, lang)
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
	c := s.texts
	key := q + "\x00" + lang
	if h, ok := c.fresh(key); ok {
		return h.msgs, nil
	}
	got, err, _ := c.sf.Do(key, func() (any, error) {
		if h, ok := c.fresh(key); ok {
			return h, nil
		}
		msgs, err := c.store.Texts(context.WithoutCancel(ctx), q, lang)
		if err != nil {
			return nil, err
		}
		h := heldTexts{msgs: msgs, at: c.now()}
		c.mu.Lock()
		if len(c.held) >= textsForgetAt {
			for k, old := range c.held {
				if h.at.Sub(old.at) >= textsTTL {
					delete(c.held, k)
				}
			}
		}
		c.held[key] = h
		c.mu.Unlock()
		return h, nil
	})
	if err != nil {
		return nil, err
	}
	return got.(heldTexts).msgs, nil
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

func (c *textsCache) fresh(key string) (heldTexts, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	h, ok := c.held[key]
	return h, ok && c.now().Sub(h.at) < textsTTL
}

// forget drops this replica's copy: an operator sees their change on
// the next load of a page served here (other replicas within textsTTL).
func (c *textsCache) forget(q, lang string) {
	c.mu.Lock()
	delete(c.held, q+"\x00"+lang)
	c.mu.Unlock()
}
