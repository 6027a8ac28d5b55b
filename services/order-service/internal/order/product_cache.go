package order

import (
	"context"
	"slices"
	"sync"
	"time"

	"golang.org/x/sync/singleflight"
)

// catalogTTL is how stale the public product list may be: the page shows
// stock as a hint, the order transaction is what counts.
const catalogTTL = time.Second

// productCache answers the public product lists from memory, so anonymous
// reads cannot load the order database: at most one query a second for the
// queues that sell something, plus one for each queue's list, however many
// callers and whatever queue ids they ask for. A queue that sells nothing
// is answered from the cached set of queue ids, without a query.
type productCache struct {
	repo Catalog
	now  func() time.Time
	sf   singleflight.Group

	mu       sync.Mutex
	queues   []string // sorted
	queuesAt time.Time
	lists    map[string]cachedList
}

type cachedList struct {
	ps []Product
	at time.Time
}

func newProductCache(repo Catalog) *productCache {
	return &productCache{repo: repo, now: time.Now, lists: map[string]cachedList{}}
}

// Products is queue q's product list, at most catalogTTL old.
func (c *productCache) Products(ctx context.Context, q string) ([]Product, error) {
	queues, err := c.queueIDs(ctx)
	if err != nil {
		return nil, err
	}
	if _, ok := slices.BinarySearch(queues, q); !ok {
		return nil, nil
	}
	c.mu.Lock()
	l, ok := c.lists[q]
	c.mu.Unlock()
	if ok && c.now().Sub(l.at) < catalogTTL {
		return l.ps, nil
	}
	v, err, _ := c.sf.Do("products:"+q, func() (any, error) {
		// A call that just finished may have filled it between our look
		// and this one: look again, so a burst makes one query.
		c.mu.Lock()
		l, ok := c.lists[q]
		c.mu.Unlock()
		if ok && c.now().Sub(l.at) < catalogTTL {
			return l.ps, nil
		}
		ps, err := c.repo.Products(context.WithoutCancel(ctx), q)
		if err != nil {
			return nil, err
		}
		c.mu.Lock()
		c.lists[q] = cachedList{ps: ps, at: c.now()}
		c.mu.Unlock()
		return ps, nil
	})
	if err != nil {
		return nil, err
	}
	return v.([]Product), nil
}

// forget drops what is cached about q and the set of queues, after this
// replica changed a product of q (an operator sees their change at once).
func (c *productCache) forget(q string) {
	c.mu.Lock()
	delete(c.lists, q)
	c.queuesAt = time.Time{}
	c.mu.Unlock()
}

// queueIDs is the set of queues with products, at most catalogTTL old; the
// lists of queues that left it are dropped, so the cache holds no more
// lists than there are queues with products.
func (c *productCache) queueIDs(ctx context.Context) ([]string, error) {
	c.mu.Lock()
	queues, at := c.queues, c.queuesAt
	c.mu.Unlock()
	if !at.IsZero() && c.now().Sub(at) < catalogTTL {
		return queues, nil
	}
	v, err, _ := c.sf.Do("queues", func() (any, error) {
		c.mu.Lock()
		queues, at := c.queues, c.queuesAt
		c.mu.Unlock()
		if !at.IsZero() && c.now().Sub(at) < catalogTTL {
			return queues, nil
		}
		ids, err := c.repo.QueueIDs(context.WithoutCancel(ctx))
		if err != nil {
			return nil, err
		}
		slices.Sort(ids)
		c.mu.Lock()
		c.queues, c.queuesAt = ids, c.now()
		for q := range c.lists {
			if _, ok := slices.BinarySearch(ids, q); !ok {
				delete(c.lists, q)
			}
		}
		c.mu.Unlock()
		return ids, nil
	})
	if err != nil {
		return nil, err
	}
	return v.([]string), nil
}
