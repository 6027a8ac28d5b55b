package wire

import (
	"context"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/waitingroom/waitingroom/pkg/auth"
	"github.com/waitingroom/waitingroom/pkg/queue"
	"github.com/waitingroom/waitingroom/pkg/testenv"
	"github.com/waitingroom/waitingroom/pkg/ticket"
)

// TestStreamsOfAShardedQueue: in a queue of three lines, streams with and
// without a ticket are told each holder's place in the whole queue, as the
// gateway's Redis read tells it, within max(3, 1 %) (one place in a line
// stands for about three in the queue).
func TestStreamsOfAShardedQueue(t *testing.T) {
	t.Parallel()
	const shards, n = 3, 600
	url, store := privateReplica(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	q := testenv.ID(t)
	if _, _, err := store.UpdateConfig(ctx, q, func(c queue.Config, _ bool) (queue.Config, error) {
		c.Shards = shards
		return c, nil
	}); err != nil {
		t.Fatal(err)
	}
	signer, err := ticket.NewSigner(ticket.DeriveKey(secret))
	if err != nil {
		t.Fatal(err)
	}
	tickets := map[int]string{}
	for i := range n {
		user := fmt.Sprintf("u%03d", i)
		st, err := store.Enter(ctx, q, user)
		if err != nil || st.State != queue.Waiting || st.Lines != shards {
			t.Fatalf("enter %d: %+v %v", i, st, err)
		}
		tickets[i] = signer.Sign(q, user, ticket.Place{Generation: st.Generation, Seq: st.Seq})
	}
	ver, _ := auth.NewVerifier(secret)
	streams := map[int]*positionStream{}
	for _, i := range []int{199, 399, 599} {
		code, ps := openWithTicket(t, ctx, url, q, fmt.Sprintf("u%03d", i), tickets[i], ver)
		if code != http.StatusOK {
			t.Fatalf("stream of u%03d with its ticket: %d", i, code)
		}
		streams[i] = ps
	}
	_, plain := openWithTicket(t, ctx, url, q, "u300", "", ver)
	streams[300] = plain
	time.Sleep(2 * time.Second)
	for i, ps := range streams {
		want, err := store.Position(ctx, q, fmt.Sprintf("u%03d", i))
		if err != nil || want.Total != n {
			t.Fatalf("u%03d from Redis: %+v %v", i, want, err)
		}
		got := ps.seen()
		if len(got) < 5 {
			t.Fatalf("u%03d got %d positions in 2 s, want about 10", i, len(got))
		}
		for _, p := range got {
			if d := p - want.Position; max(d, -d) > max(shards, want.Position/100) {
				t.Fatalf("u%03d was told %d, Redis says %d of %d (all: %v)", i, p, want.Position, want.Total, got)
			}
		}
		t.Logf("u%03d (line %d): told %v; Redis: %d of %d", i, want.Line, got[len(got)-1], want.Position, want.Total)
	}
}
