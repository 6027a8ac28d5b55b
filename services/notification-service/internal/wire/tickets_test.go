package wire

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/waitingroom/waitingroom/pkg/auth"
	"github.com/waitingroom/waitingroom/pkg/queue"
	"github.com/waitingroom/waitingroom/pkg/redisstore"
	"github.com/waitingroom/waitingroom/pkg/testenv"
	"github.com/waitingroom/waitingroom/pkg/ticket"
)

// positionStream reads the position events of one stream.
type positionStream struct {
	mu        sync.Mutex
	positions []int64
}

func (p *positionStream) seen() []int64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]int64(nil), p.positions...)
}

// openWithTicket opens q's stream as user with ?ticket=tk (none when
// empty) and returns the status and, on 200, its position events.
func openWithTicket(t *testing.T, ctx context.Context, url, q, user, tk string, ver *auth.Verifier) (int, *positionStream) {
	t.Helper()
	jwt, err := ver.Mint(user, "", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	u := url + "/api/v1/queues/" + q + "/events?access_token=" + jwt
	if tk != "" {
		u += "&ticket=" + tk
	}
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if res.StatusCode != http.StatusOK {
		var p struct{ Type string }
		_ = json.NewDecoder(res.Body).Decode(&p)
		res.Body.Close()
		if p.Type != "" && res.StatusCode == http.StatusForbidden && p.Type != "ticket-invalid" {
			t.Fatalf("403 of type %q, want ticket-invalid", p.Type)
		}
		return res.StatusCode, nil
	}
	ps := &positionStream{}
	go func() {
		defer res.Body.Close()
		sc := bufio.NewScanner(res.Body)
		var name string
		for sc.Scan() {
			line := sc.Text()
			switch {
			case strings.HasPrefix(line, "event: "):
				name = line[7:]
			case strings.HasPrefix(line, "data: ") && name == "position":
				var v queue.View
				if json.Unmarshal([]byte(line[6:]), &v) == nil {
					ps.mu.Lock()
					ps.positions = append(ps.positions, v.Position)
					ps.mu.Unlock()
				}
			}
		}
	}()
	return http.StatusOK, ps
}

// zranks is how many ZRANK commands the private Redis has run: the
// position script's, which frontier reads never run.
func zranks(t *testing.T, rdb redis.UniversalClient) int64 {
	t.Helper()
	info, err := rdb.Info(context.Background(), "commandstats").Result()
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(info, "\n") {
		if rest, ok := strings.CutPrefix(line, "cmdstat_zrank:calls="); ok {
			n, _ := strconv.ParseInt(rest[:strings.IndexByte(rest, ',')], 10, 64)
			return n
		}
	}
	return 0
}

// privateReplica runs a replica on a private Redis (position rounds every
// 200 ms) and returns its URL and a Store on that Redis.
func privateReplica(t *testing.T) (string, *redisstore.Store) {
	t.Helper()
	srv := testenv.StartRedisServer(t)
	exchange := "test." + testenv.ID(t)
	t.Cleanup(func() { testenv.DeleteAMQPTopology(testenv.AMQPURL(t), exchange) })
	cfg := testConfig(t, exchange)
	cfg.Redis.URL = srv.URL()
	cfg.PositionEvery = 200 * time.Millisecond
	return replica(t, cfg), testenv.StoreAt(t, srv.URL())
}

// TestStreamsWithTicketsTakePositionsFromTheFrontier: on a private Redis,
// streams opened with a ticket far from the front get their exact position
// every round without a position read; a stream without one is read every
// round; a ticket of someone else is 403 ticket-invalid.
func TestStreamsWithTicketsTakePositionsFromTheFrontier(t *testing.T) {
	t.Parallel()
	url, store := privateReplica(t)
	rdb := store.Client()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	q := testenv.ID(t)
	if _, _, err := store.UpdateConfig(ctx, q, func(c queue.Config, _ bool) (queue.Config, error) { return c, nil }); err != nil {
		t.Fatal(err)
	}
	signer, err := ticket.NewSigner(ticket.DeriveKey(secret))
	if err != nil {
		t.Fatal(err)
	}
	tickets := map[int]string{}
	for i := range 300 {
		st, err := store.Enter(ctx, q, fmt.Sprintf("u%03d", i))
		if err != nil || st.Seq != int64(i+1) {
			t.Fatalf("enter %d: %+v %v", i, st, err)
		}
		tickets[i] = signer.Sign(q, fmt.Sprintf("u%03d", i), ticket.Place{Generation: st.Generation, Seq: st.Seq})
	}
	ver, _ := auth.NewVerifier(secret)
	if code, _ := openWithTicket(t, ctx, url, q, "u100", tickets[101], ver); code != http.StatusForbidden {
		t.Fatalf("a stream with another user's ticket: %d, want 403", code)
	}
	// The first ticket stream makes the replica track q; the frontier
	// comes within 100 ms.
	ticketed := map[int]*positionStream{}
	for _, i := range []int{99, 199, 299} {
		code, ps := openWithTicket(t, ctx, url, q, fmt.Sprintf("u%03d", i), tickets[i], ver)
		if code != http.StatusOK {
			t.Fatalf("stream of u%03d with its ticket: %d", i, code)
		}
		ticketed[i] = ps
	}
	_, plain := openWithTicket(t, ctx, url, q, "u150", "", ver)
	time.Sleep(300 * time.Millisecond)
	z0, plain0 := zranks(t, rdb), len(plain.seen())
	time.Sleep(2 * time.Second)
	z1, rounds := zranks(t, rdb), len(plain.seen())-plain0
	if rounds < 5 {
		t.Fatalf("the plain stream got %d positions in 2 s, want about 10", rounds)
	}
	for i, ps := range ticketed {
		got := ps.seen()
		if len(got) < rounds {
			t.Fatalf("u%03d got %d positions, the plain stream %d", i, len(got), rounds)
		}
		for _, p := range got {
			if p != int64(i+1) {
				t.Fatalf("u%03d was told position %d, want %d (all: %v)", i, p, i+1, got)
			}
		}
	}
	// One ZRANK a round for the plain stream (and at most one more for a
	// round cut by the window's edges); none for the three with tickets
	// (make chaos). On a busy machine (make test) a round may come after
	// the frontier's refresh was due and read the ticket streams too: up
	// to one more a round; without the frontier there would be three.
	slack := int64(testenv.Pick(rounds, 1))
	if d := z1 - z0; d > int64(rounds)+slack || d < int64(rounds)-1 {
		t.Fatalf("%d ZRANKs over %d rounds: the ticket streams' positions were read from Redis", d, rounds)
	}
	t.Logf("%d rounds in 2 s: %d ZRANKs (the plain stream's), 0 for the 3 ticket streams", rounds, z1-z0)
}
