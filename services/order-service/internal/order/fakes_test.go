package order_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/waitingroom/waitingroom/pkg/queue"
	"github.com/waitingroom/waitingroom/services/order-service/internal/order"
)

// memTokens is the entry-token store in memory: every token checks as
// check says and consumes as token tok-1, with a minute left.
type memTokens struct {
	order.Tokens // Overdue is never called here
	mu           sync.Mutex
	check        queue.TokenCheck
	consumed     int
	settled      int
	handedOff    []string // token ids
}

func (m *memTokens) CheckToken(context.Context, string, string, string) (queue.TokenCheck, error) {
	return m.check, nil
}

func (m *memTokens) Consume(context.Context, string, string, string, string, time.Duration, time.Duration) (queue.Consumed, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.consumed++
	return queue.Consumed{TokenID: "tok-1", ExpiresAt: time.Now().Add(time.Minute)}, nil
}

func (m *memTokens) Settle(context.Context, string, string, string, string) (bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.settled++
	return true, nil
}

func (m *memTokens) HandOff(_ context.Context, _, _, tokenID string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.handedOff = append(m.handedOff, tokenID)
	return nil
}

// memRepo is the order database in memory. placeErr fails PlaceOrder,
// outboxErr fails AddEvent; calls counts every method by name.
type memRepo struct {
	mu        sync.Mutex
	placeErr  error
	outboxErr error
	orders    map[string]order.Order
	events    []order.Event
	products  map[string]order.Product
	answers   map[string]order.StoredAnswer // by user + "|" + key; not Done = claimed
	calls     map[string]int
}

func newMemRepo() *memRepo {
	return &memRepo{orders: map[string]order.Order{}, products: map[string]order.Product{},
		answers: map[string]order.StoredAnswer{}, calls: map[string]int{}}
}

func (m *memRepo) call(name string) {
	m.mu.Lock()
	m.calls[name]++
	m.mu.Unlock()
}

func (m *memRepo) PlaceOrder(_ context.Context, o order.Order, event func(order.Order) order.Event) (order.Order, error) {
	m.call("PlaceOrder")
	if m.placeErr != nil {
		return order.Order{}, m.placeErr
	}
	o.CreatedAt = time.Now().UTC()
	m.mu.Lock()
	defer m.mu.Unlock()
	m.orders[o.ID] = o
	m.events = append(m.events, event(o))
	return o, nil
}

func (m *memRepo) AddEvent(_ context.Context, e order.Event) (bool, error) {
	m.call("AddEvent")
	if m.outboxErr != nil {
		return false, m.outboxErr
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, have := range m.events {
		if have.EventID() == e.EventID() {
			return false, nil
		}
	}
	m.events = append(m.events, e)
	return true, nil
}

func (m *memRepo) Order(_ context.Context, id string) (order.Order, error) {
	m.call("Order")
	m.mu.Lock()
	defer m.mu.Unlock()
	o, ok := m.orders[id]
	if !ok {
		return order.Order{}, fmt.Errorf("%w: %s", order.ErrOrderNotFound, id)
	}
	return o, nil
}

func (m *memRepo) OrderByToken(_ context.Context, tokenID string) (order.Order, bool, error) {
	m.call("OrderByToken")
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, o := range m.orders {
		if o.EntryTokenID == tokenID {
			return o, true, nil
		}
	}
	return order.Order{}, false, nil
}

func (m *memRepo) QueueIDs(context.Context) ([]string, error) {
	m.call("QueueIDs")
	m.mu.Lock()
	defer m.mu.Unlock()
	seen := map[string]bool{}
	var ids []string
	for _, p := range m.products {
		if !seen[p.QueueID] {
			seen[p.QueueID] = true
			ids = append(ids, p.QueueID)
		}
	}
	sort.Strings(ids)
	return ids, nil
}

func (m *memRepo) Products(_ context.Context, q string) ([]order.Product, error) {
	m.call("Products")
	m.mu.Lock()
	defer m.mu.Unlock()
	var ps []order.Product
	for _, p := range m.products {
		if p.QueueID == q {
			ps = append(ps, p)
		}
	}
	sort.Slice(ps, func(i, j int) bool { return ps[i].ID < ps[j].ID })
	return ps, nil
}

func (m *memRepo) UpsertProduct(_ context.Context, p order.Product) (order.Product, bool, error) {
	m.call("UpsertProduct")
	m.mu.Lock()
	defer m.mu.Unlock()
	_, had := m.products[p.ID]
	m.products[p.ID] = p
	return p, !had, nil
}

func (m *memRepo) BeginIdempotent(_ context.Context, user, key string) (order.StoredAnswer, bool, error) {
	m.call("BeginIdempotent")
	m.mu.Lock()
	defer m.mu.Unlock()
	if a, ok := m.answers[user+"|"+key]; ok {
		return a, false, nil
	}
	m.answers[user+"|"+key] = order.StoredAnswer{}
	return order.StoredAnswer{}, true, nil
}

func (m *memRepo) LookupIdempotent(_ context.Context, user, key string) (order.StoredAnswer, bool, error) {
	m.call("LookupIdempotent")
	m.mu.Lock()
	defer m.mu.Unlock()
	a, ok := m.answers[user+"|"+key]
	return a, ok, nil
}

func (m *memRepo) FinishIdempotent(_ context.Context, user, key string, status int, body []byte) error {
	m.call("FinishIdempotent")
	m.mu.Lock()
	defer m.mu.Unlock()
	m.answers[user+"|"+key] = order.StoredAnswer{Status: status, Body: body, Done: true}
	return nil
}

func (m *memRepo) AbandonIdempotent(_ context.Context, user, key string) error {
	m.call("AbandonIdempotent")
	m.mu.Lock()
	defer m.mu.Unlock()
	if !m.answers[user+"|"+key].Done {
		delete(m.answers, user+"|"+key)
	}
	return nil
}

// memPublisher is the direct publisher in memory.
type memPublisher struct {
	mu        sync.Mutex
	published []order.Event
}

func (p *memPublisher) PublishEvent(_ context.Context, e order.Event) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.published = append(p.published, e)
	return nil
}

// refuseAll is a rate limit that is always used up.
type refuseAll struct{}

func (refuseAll) Allow(context.Context, string) (bool, time.Duration, error) {
	return false, time.Second, nil
}

func newService(t *testing.T, tokens *memTokens, repo *memRepo, direct order.DirectPublisher, limits order.Limits) *order.Service {
	t.Helper()
	svc, err := order.New(tokens, repo, direct, limits, slog.New(slog.NewTextHandler(io.Discard, nil)), order.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return svc
}
