package stream

import (
	"sync"

	"github.com/waitingroom/waitingroom/pkg/queue"
	"github.com/waitingroom/waitingroom/pkg/ticket"
)

// Frontiers are the queues' admission frontiers kept in memory;
// redisstore.FrontierCache implements it. Lookup returns nil when it has
// none fresh for q.
type Frontiers interface {
	Lookup(q string) *queue.Frontier
}

// WithTickets makes s accept queue tickets on streams (Request.Ticket,
// checked with tickets) and tell a stream whose ticket's place is far from
// the front its position from frontiers, without the store. It returns s.
func (s *Service) WithTickets(tickets *ticket.Signer, frontiers Frontiers) *Service {
	s.tickets, s.frontiers = tickets, frontiers
	return s
}

// places remembers the ticket of each user with a stream open here, by
// queue: the position rounds place them from the frontier.
type places struct {
	mu sync.Mutex
	m  map[string]map[string]ticket.Place // queue -> user -> place
}

func (p *places) set(q, user string, pl ticket.Place) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.m == nil {
		p.m = map[string]map[string]ticket.Place{}
	}
	if p.m[q] == nil {
		p.m[q] = map[string]ticket.Place{}
	}
	p.m[q][user] = pl
}

func (p *places) get(q, user string) (ticket.Place, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	pl, ok := p.m[q][user]
	return pl, ok
}

// keepOnly forgets the places of users who no longer have a stream open
// (open: queue -> users, as the hub lists them).
func (p *places) keepOnly(open map[string][]string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for q, byUser := range p.m {
		users, ok := open[q]
		if !ok {
			delete(p.m, q)
			continue
		}
		still := make(map[string]bool, len(users))
		for _, u := range users {
			still[u] = true
		}
		for u := range byUser {
			if !still[u] {
				delete(byUser, u)
			}
		}
	}
}

// fromFrontier is user's standing in q from the frontier, when their
// ticket's place is far enough from the front for it.
func (s *Service) fromFrontier(q, user string) (queue.Standing, bool) {
	if s.frontiers == nil {
		return queue.Standing{}, false
	}
	pl, ok := s.places.get(q, user)
	if !ok {
		return queue.Standing{}, false
	}
	return queue.StandingOf(s.frontiers, q, user, pl.Generation, pl.Seq)
}
