package ordertest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"

	"github.com/waitingroom/waitingroom/services/order-service/internal/order"
)

// claimLease is how long an unfinished Idempotency-Key claim blocks
// retries before a new request may take it over, as in pg.
const claimLease = time.Minute

// Repo is order.Repo (Orders, Catalog and Answers) in memory, with the
// rules of the pg adapter (see RunOrdersContract, RunCatalogContract and
// RunAnswersContract): products must be put before they are ordered, an
// order takes their stock, the outbox drops an event id it has and holds
// one event per order attempt. For unit tests it counts the calls of each
// method (Calls), keeps the outbox's events (Events) and fails a method on
// demand, before it changes anything (Fail) or after (AnswerLate).
type Repo struct {
	mu       sync.Mutex
	products map[string]order.Product // by id: ids are unique across queues
	orders   map[string]order.Order
	outbox   []order.Event
	answers  map[answerKey]answer
	calls    map[string]int
	fail     map[string]error
	late     map[string]error
}

type answerKey struct{ user, key string }

type answer struct {
	order.StoredAnswer
	claimedAt time.Time
}

// NewRepo returns an empty Repo.
func NewRepo() *Repo {
	return &Repo{products: map[string]order.Product{}, orders: map[string]order.Order{},
		answers: map[answerKey]answer{}, calls: map[string]int{}, fail: map[string]error{}, late: map[string]error{}}
}

// Fail makes every later call of method (for example "PlaceOrder") fail
// with err before it changes anything; a nil err ends that.
func (r *Repo) Fail(method string, err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.fail[method] = err
}

// AnswerLate makes every later call of method do its work and then fail
// with err, as a call whose answer was lost or came after its caller gave
// up (a COMMIT that landed while the client timed out); a nil err ends
// that.
func (r *Repo) AnswerLate(method string, err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.late[method] = err
}

// Calls is how often method was called.
func (r *Repo) Calls(method string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.calls[method]
}

// AllCalls is every method's call count.
func (r *Repo) AllCalls() map[string]int {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make(map[string]int, len(r.calls))
	for k, v := range r.calls {
		out[k] = v
	}
	return out
}

// ResetCalls forgets the counted calls, after a test's setup.
func (r *Repo) ResetCalls() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.calls = map[string]int{}
}

// Events is the outbox: every event written, in order.
func (r *Repo) Events() []order.Event {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.outbox)
}

// call counts a call of method and returns its injected failure; the
// caller holds mu.
func (r *Repo) call(method string) error {
	r.calls[method]++
	return r.fail[method]
}

// now is the database's clock as PostgreSQL keeps it: UTC, microseconds.
func now() time.Time { return time.Now().UTC().Truncate(time.Microsecond) }

// PlaceOrder counts the order against the person's MaxOrders in the queue,
// takes the stock, stores the order, its event and its Key's answer, all or
// nothing.
func (r *Repo) PlaceOrder(_ context.Context, pl order.Placement) (order.Order, error) {
	o, maxOrders, event := pl.Order, pl.MaxOrders, pl.Event
	r.mu.Lock()
	defer r.mu.Unlock()
	if err := r.call("PlaceOrder"); err != nil {
		return order.Order{}, err
	}
	if o.Quantity <= 0 {
		return order.Order{}, fmt.Errorf("ordertest: place order: quantity %d must be positive", o.Quantity)
	}
	if event == nil {
		return order.Order{}, errors.New("ordertest: place order: no event builder")
	}
	if o.ID == "" {
		o.ID = uuid.NewString()
	}
	if o.Status == "" {
		o.Status = order.StatusCreated
	}
	mine := 0
	for _, have := range r.orders {
		if have.QueueID == o.QueueID && have.UserID == o.UserID {
			mine++
		}
	}
	p, ok := r.products[o.ProductID]
	switch {
	case maxOrders > 0 && int64(mine) >= maxOrders:
		return order.Order{}, fmt.Errorf("place order: %w: %d in queue %s", order.ErrOrderLimitReached, maxOrders, o.QueueID)
	case !ok || p.QueueID != o.QueueID:
		return order.Order{}, fmt.Errorf("place order: %w: %s in queue %s", order.ErrProductNotFound, o.ProductID, o.QueueID)
	case p.Stock < o.Quantity:
		return order.Order{}, fmt.Errorf("place order: %w: %s", order.ErrSoldOut, o.ProductID)
	}
	for _, have := range r.orders {
		switch {
		case have.ID == o.ID:
			return order.Order{}, fmt.Errorf("ordertest: place order: order %s exists", o.ID)
		case have.EntryTokenID == o.EntryTokenID:
			return order.Order{}, fmt.Errorf("place order: %w", order.ErrDuplicateToken)
		case o.IdempotencyKey != "" && have.UserID == o.UserID && have.IdempotencyKey == o.IdempotencyKey:
			return order.Order{}, fmt.Errorf("place order: %w: an order exists for this key", order.ErrIdempotencyInProgress)
		}
	}
	o.CreatedAt = now()
	e := event(o)
	if err := r.encodable(e); err != nil {
		return order.Order{}, err
	}
	if r.hasEvent(e.EventID()) {
		return order.Order{}, fmt.Errorf("ordertest: place order: event %s exists", e.EventID())
	}
	if r.attemptTaken(e) {
		return order.Order{}, fmt.Errorf("place order: %w: order %s", order.ErrAttemptFailed, o.ID)
	}
	if pl.Key != "" && pl.Answer == nil {
		return order.Order{}, errors.New("ordertest: place order: a key without an answer")
	}
	p.Stock -= o.Quantity
	p.UpdatedAt = o.CreatedAt
	r.products[p.ID] = p
	r.orders[o.ID] = o
	r.outbox = append(r.outbox, e)
	if pl.Key != "" {
		a := pl.Answer(o)
		a.Done, a.Body = true, slices.Clone(a.Body)
		r.answers[answerKey{o.UserID, pl.Key}] = answer{StoredAnswer: a, claimedAt: time.Now()}
	}
	if err := r.late["PlaceOrder"]; err != nil {
		return order.Order{}, err
	}
	return o, nil
}

// attemptTaken reports whether the outbox resolves e's attempt with
// another event already (one event per attempt, as pg's
// outbox_attempt_key); the caller holds mu.
func (r *Repo) attemptTaken(e order.Event) bool {
	return e.Attempt() != "" && slices.ContainsFunc(r.outbox, func(have order.Event) bool {
		return have.Attempt() == e.Attempt() && have.EventID() != e.EventID()
	})
}

// encodable refuses what the pg adapter cannot encode; the caller holds mu.
func (r *Repo) encodable(e order.Event) error {
	switch e.(type) {
	case order.Created, order.Failed:
		return nil
	case nil:
		return errors.New("ordertest: no event")
	}
	return fmt.Errorf("ordertest: %T is not an order event", e)
}

// hasEvent reports whether the outbox has an event with id; the caller
// holds mu.
func (r *Repo) hasEvent(id string) bool {
	return slices.ContainsFunc(r.outbox, func(e order.Event) bool { return e.EventID() == id })
}

// AddEvent writes e to the outbox; false when its id is there already.
func (r *Repo) AddEvent(_ context.Context, e order.Event) (bool, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if err := r.call("AddEvent"); err != nil {
		return false, err
	}
	if err := r.encodable(e); err != nil {
		return false, err
	}
	if r.hasEvent(e.EventID()) {
		return false, nil
	}
	if r.attemptTaken(e) {
		return false, fmt.Errorf("add event %s: %w", e.EventID(), order.ErrOrderPlaced)
	}
	r.outbox = append(r.outbox, e)
	return true, nil
}

// Order returns one order, or an error wrapping order.ErrOrderNotFound.
func (r *Repo) Order(_ context.Context, id string) (order.Order, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if err := r.call("Order"); err != nil {
		return order.Order{}, err
	}
	o, ok := r.orders[id]
	if !ok {
		return order.Order{}, fmt.Errorf("order: %w: %s", order.ErrOrderNotFound, id)
	}
	return o, nil
}

// OrderByToken returns the order placed with tokenID, if any.
func (r *Repo) OrderByToken(_ context.Context, tokenID string) (order.Order, bool, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if err := r.call("OrderByToken"); err != nil {
		return order.Order{}, false, err
	}
	for _, o := range r.orders {
		if o.EntryTokenID == tokenID {
			return o, true, nil
		}
	}
	return order.Order{}, false, nil
}

// QueueIDs lists the queues with products, ordered.
func (r *Repo) QueueIDs(context.Context) ([]string, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if err := r.call("QueueIDs"); err != nil {
		return nil, err
	}
	var ids []string
	for _, p := range r.products {
		if !slices.Contains(ids, p.QueueID) {
			ids = append(ids, p.QueueID)
		}
	}
	slices.Sort(ids)
	return ids, nil
}

// Products lists queue q's products, ordered by id.
func (r *Repo) Products(_ context.Context, q string) ([]order.Product, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if err := r.call("Products"); err != nil {
		return nil, err
	}
	ps := []order.Product{}
	for _, p := range r.products {
		if p.QueueID == q {
			ps = append(ps, p)
		}
	}
	slices.SortFunc(ps, func(a, b order.Product) int { return strings.Compare(a.ID, b.ID) })
	return ps, nil
}

// UpsertProduct creates p or replaces the product with its id (which may
// move it to another queue); created reports a new one.
func (r *Repo) UpsertProduct(_ context.Context, p order.Product) (order.Product, bool, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if err := r.call("UpsertProduct"); err != nil {
		return order.Product{}, false, err
	}
	switch {
	case p.ID == "" || p.QueueID == "":
		return order.Product{}, false, errors.New("ordertest: upsert product: id and queue id are required")
	case p.Stock < 0 || p.PriceCents < 0:
		return order.Product{}, false, errors.New("ordertest: upsert product: stock and price must not be negative")
	}
	_, had := r.products[p.ID]
	p.UpdatedAt = now()
	r.products[p.ID] = p
	return p, !had, nil
}

// BeginIdempotent claims (user, key): fresh when this call claimed it (or
// took over a claim older than a minute); otherwise the stored answer, or
// a not-Done one while the first request runs.
func (r *Repo) BeginIdempotent(_ context.Context, user, key string) (order.StoredAnswer, bool, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if err := r.call("BeginIdempotent"); err != nil {
		return order.StoredAnswer{}, false, err
	}
	k := answerKey{user, key}
	a, ok := r.answers[k]
	if ok && (a.Done || time.Since(a.claimedAt) < claimLease) {
		return a.StoredAnswer, false, nil
	}
	r.answers[k] = answer{claimedAt: time.Now()}
	return order.StoredAnswer{}, true, nil
}

// LookupIdempotent reads (user, key)'s record without claiming it.
func (r *Repo) LookupIdempotent(_ context.Context, user, key string) (order.StoredAnswer, bool, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if err := r.call("LookupIdempotent"); err != nil {
		return order.StoredAnswer{}, false, err
	}
	a, ok := r.answers[answerKey{user, key}]
	return a.StoredAnswer, ok, nil
}

// FinishIdempotent stores the answer to replay, claimed or not.
func (r *Repo) FinishIdempotent(_ context.Context, user, key string, status int, body []byte) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if err := r.call("FinishIdempotent"); err != nil {
		return err
	}
	if body == nil {
		body = []byte{}
	}
	r.answers[answerKey{user, key}] = answer{StoredAnswer: order.StoredAnswer{Status: status, Body: slices.Clone(body), Done: true}, claimedAt: time.Now()}
	return nil
}

// AbandonIdempotent deletes an unfinished claim; a stored answer stays.
func (r *Repo) AbandonIdempotent(_ context.Context, user, key string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if err := r.call("AbandonIdempotent"); err != nil {
		return err
	}
	if k := (answerKey{user, key}); !r.answers[k].Done {
		delete(r.answers, k)
	}
	return nil
}
