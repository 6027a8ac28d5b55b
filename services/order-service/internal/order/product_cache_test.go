package order

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// countingRepo counts the product cache's queries.
type countingRepo struct {
	Catalog
	queues, lists atomic.Int64
	delay         time.Duration
	fail          atomic.Bool
}

func (r *countingRepo) QueueIDs(context.Context) ([]string, error) {
	r.queues.Add(1)
	time.Sleep(r.delay)
	if r.fail.Load() {
		return nil, ErrUnavailable
	}
	return []string{"sale", "other"}, nil
}

func (r *countingRepo) Products(_ context.Context, q string) ([]Product, error) {
	r.lists.Add(1)
	time.Sleep(r.delay)
	return []Product{{ID: "p-" + q, QueueID: q, Stock: 7}}, nil
}

// A thousand concurrent anonymous reads, half of them for queue ids that
// sell nothing, cost the database one query for the set of queues and one
// for the list; a second later, one of each again.
func TestProductCacheBoundsPublicReadsOnTheDatabase(t *testing.T) {
	repo := &countingRepo{delay: 20 * time.Millisecond}
	c := newProductCache(repo)
	var clock atomic.Int64
	clock.Store(time.Unix(1_800_000_000, 0).UnixNano())
	c.now = func() time.Time { return time.Unix(0, clock.Load()) }

	round := func() {
		t.Helper()
		var (
			wg   sync.WaitGroup
			mu   sync.Mutex
			errs []error
		)
		for i := range 1000 {
			wg.Go(func() {
				q := "sale"
				if i%2 == 1 {
					q = fmt.Sprintf("guess-%d", i)
				}
				ps, err := c.Products(context.Background(), q)
				switch {
				case err != nil:
				case q == "sale" && (len(ps) != 1 || ps[0].Stock != 7):
					err = fmt.Errorf("sale: %+v", ps)
				case q != "sale" && len(ps) != 0:
					err = fmt.Errorf("%s sells nothing, got %+v", q, ps)
				}
				if err != nil {
					mu.Lock()
					errs = append(errs, err)
					mu.Unlock()
				}
			})
		}
		wg.Wait()
		if len(errs) > 0 {
			t.Fatalf("%d of 1000 reads failed, first: %v", len(errs), errs[0])
		}
	}
	round()
	if q, l := repo.queues.Load(), repo.lists.Load(); q != 1 || l != 1 {
		t.Fatalf("1000 reads made %d queue-set and %d list queries, want 1 and 1", q, l)
	}
	round()
	if q, l := repo.queues.Load(), repo.lists.Load(); q != 1 || l != 1 {
		t.Fatalf("within the second: %d and %d queries, want still 1 and 1", q, l)
	}
	clock.Add(int64(catalogTTL))
	round()
	if q, l := repo.queues.Load(), repo.lists.Load(); q != 2 || l != 2 {
		t.Fatalf("a second later: %d and %d queries, want 2 and 2", q, l)
	}
	// A local product change is seen at once.
	c.forget("sale")
	if _, err := c.Products(context.Background(), "sale"); err != nil {
		t.Fatal(err)
	}
	if q, l := repo.queues.Load(), repo.lists.Load(); q != 3 || l != 3 {
		t.Fatalf("after forget: %d and %d queries, want 3 and 3", q, l)
	}
	// A database outage is the caller's error (503), not an empty list.
	clock.Add(int64(catalogTTL))
	repo.fail.Store(true)
	if _, err := c.Products(context.Background(), "sale"); !errors.Is(err, ErrUnavailable) {
		t.Fatalf("during an outage: %v, want ErrUnavailable", err)
	}
}
