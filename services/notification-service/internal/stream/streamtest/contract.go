package streamtest

import (
	"context"
	"errors"
	"testing"

	"github.com/waitingroom/waitingroom/pkg/queue"
	"github.com/waitingroom/waitingroom/pkg/queue/queuetest"
)

// NewPositionsFunc makes a store without queues for one test, with its
// Seeder.
type NewPositionsFunc func(t *testing.T) (Positions, Seeder)

// RunPositionsContract states what the notification streams rely on from
// stream.Positions: a standing says waiting (with the place and the
// line's length), admitted (with the token) or not in the line, an unknown
// queue is queue.ErrNotFound, and PositionMany reads exactly what
// Position reads, for many users at once. MeasuredRate is the
// dispatcher's measurement, which the streams pass on and the contract
// does not state. Every case starts from an empty store and runs in
// parallel.
func RunPositionsContract(t *testing.T, newPositions NewPositionsFunc) {
	queuetest.RunContract(t, newPositions, []queuetest.Case[Positions, Seeder]{
		{Name: "UnknownQueueIsNotFound", Run: unknownQueue},
		{Name: "WaitingUsersStandInOrderOfEntry", Run: waitingInOrder},
		{Name: "AnAdmittedUserHasItsToken", Run: admittedHasToken},
		{Name: "AStrangerIsNotInTheLine", Run: stranger},
		{Name: "PositionManyReadsWhatPositionReads", Run: manyAgrees},
	})
}

const rate = 40

// waiting is the standing of the user at place pos of a line of total in
// an open queue q.
func waiting(q string, pos, total int64) queue.Standing {
	return queue.Standing{QueueID: q, State: queue.Waiting, QueueState: queue.Open, Position: pos, Total: total, ConfiguredRate: rate}
}

// sameStanding compares standings, the token by value and its times by
// instant, leaving out MeasuredRate (see RunPositionsContract) and the
// place's sequence number and the queue's generation: what a ticket binds,
// which the gateway's reads return and this service's port does not use.
func sameStanding(a, b queue.Standing) bool {
	ta, tb := a.Token, b.Token
	a.Token, b.Token, a.MeasuredRate, b.MeasuredRate = nil, nil, 0, 0
	a.Seq, b.Seq, a.Generation, b.Generation = 0, 0, 0, 0
	if a != b || (ta == nil) != (tb == nil) {
		return false
	}
	return ta == nil || ta.Secret == tb.Secret && ta.ID == tb.ID && ta.ActivateAt.Equal(tb.ActivateAt) && ta.ExpiresAt.Equal(tb.ExpiresAt)
}

func positionIs(t *testing.T, p Positions, q, user string, want queue.Standing) {
	t.Helper()
	got, err := p.Position(context.Background(), q, user)
	if err != nil || !sameStanding(got, want) {
		t.Fatalf("position of %s in %s: %+v (token %+v) %v, want %+v (token %+v)", user, q, got, got.Token, err, want, want.Token)
	}
}

func unknownQueue(t *testing.T, p Positions, seed Seeder) {
	ctx := context.Background()
	q := queuetest.ID(t)
	if st, err := p.Position(ctx, q, "ann"); !errors.Is(err, queue.ErrNotFound) {
		t.Fatalf("position in a queue nobody created: %+v %v, want ErrNotFound", st, err)
	}
	// The many-user read, made for every queue with a stream open, is
	// not an error: it finds nobody.
	if sts, err := p.PositionMany(ctx, q, []string{"ann", "bob"}); err != nil || len(sts) != 0 {
		t.Fatalf("positions in a queue nobody created: %+v %v, want none and no error", sts, err)
	}
}

func waitingInOrder(t *testing.T, p Positions, seed Seeder) {
	q := queuetest.ID(t)
	seed.Open(t, q, rate)
	users := []string{"ann", "bob", "cid"}
	for _, u := range users {
		seed.Enter(t, q, u)
	}
	for i, u := range users {
		positionIs(t, p, q, u, waiting(q, int64(i+1), 3))
	}
}

func admittedHasToken(t *testing.T, p Positions, seed Seeder) {
	q := queuetest.ID(t)
	seed.Open(t, q, rate)
	seed.Enter(t, q, "ann")
	seed.Enter(t, q, "bob")
	user, tok := seed.Admit(t, q)
	if user != "ann" || tok.Secret == "" || tok.ID == "" || !tok.ExpiresAt.After(tok.ActivateAt) {
		t.Fatalf("admitted %s with %+v, want ann, the head, with a token", user, tok)
	}
	positionIs(t, p, q, "ann", queue.Standing{QueueID: q, State: queue.Admitted, QueueState: queue.Open, Total: 1, ConfiguredRate: rate, Token: &tok})
	positionIs(t, p, q, "bob", waiting(q, 1, 1))
}

func stranger(t *testing.T, p Positions, seed Seeder) {
	q := queuetest.ID(t)
	seed.Open(t, q, rate)
	seed.Enter(t, q, "ann")
	positionIs(t, p, q, "zed", queue.Standing{QueueID: q, State: queue.NotInQueue, QueueState: queue.Open, Total: 1, ConfiguredRate: rate})
}

func manyAgrees(t *testing.T, p Positions, seed Seeder) {
	ctx := context.Background()
	q := queuetest.ID(t)
	seed.Open(t, q, rate)
	for _, u := range []string{"ann", "bob", "cid"} {
		seed.Enter(t, q, u)
	}
	seed.Admit(t, q)
	users := []string{"ann", "bob", "cid", "zed"}
	sts, err := p.PositionMany(ctx, q, users)
	if err != nil || len(sts) != len(users) {
		t.Fatalf("positions of %v: %+v %v, want one each", users, sts, err)
	}
	for _, u := range users {
		positionIs(t, p, q, u, sts[u])
	}
	if sts["ann"].State != queue.Admitted || sts["cid"].Position != 2 || sts["zed"].State != queue.NotInQueue {
		t.Fatalf("positions %+v: want ann admitted, cid second, zed not in the line", sts)
	}
	if none, err := p.PositionMany(ctx, q, nil); err != nil || len(none) != 0 {
		t.Fatalf("positions of nobody: %+v %v, want none", none, err)
	}
}
