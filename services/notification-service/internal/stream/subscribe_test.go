package stream

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"maps"
	"testing"
	"time"

	"github.com/waitingroom/waitingroom/pkg/queue"
	"github.com/waitingroom/waitingroom/services/notification-service/internal/hub"
	"github.com/waitingroom/waitingroom/services/notification-service/internal/stream/streamtest"
)

// fixture is a Service over an in-memory store and a hub capped at two
// streams per address and two per user, whose drops are counted as wire
// counts them.
type fixture struct {
	svc *Service
	hub *hub.Hub
	pos *streamtest.Store
	rec *counts
}

// newFixture makes queues q1 and q2, where ann, bob and cid wait in that
// order; queue "missing" does not exist.
func newFixture(buffer int) *fixture {
	pos, rec := streamtest.NewStore(), newCounts()
	for _, q := range []string{"q1", "q2"} {
		pos.Open(q, 10)
		for _, u := range []string{"ann", "bob", "cid"} {
			pos.Enter(q, u)
		}
	}
	h := hub.New(buffer, 2, hub.MaxPerUser(2))
	return &fixture{svc: New(h, pos, slog.New(slog.NewTextHandler(io.Discard, nil)), rec, Options{}), hub: h, pos: pos, rec: rec}
}

// admit gives ann, the head of q1's line, a token with id tokenID.
func (f *fixture) admit(t *testing.T, tokenID string) queue.Token {
	t.Helper()
	now := time.Now()
	tok := queue.Token{Secret: "secret-" + tokenID, ID: tokenID, ActivateAt: now, ExpiresAt: now.Add(time.Minute)}
	if user, ok := f.pos.Admit("q1", tok); !ok || user != "ann" {
		t.Fatalf("admitted %q (%v), want ann", user, ok)
	}
	st, err := f.pos.Position(context.Background(), "q1", "ann")
	if err != nil || st.Token == nil {
		t.Fatalf("ann after her admission: %+v %v", st, err)
	}
	f.pos.ResetReads()
	return *st.Token
}

func TestSubscribeRefuses(t *testing.T) {
	cases := []struct {
		name    string
		prepare func(f *fixture)
		req     Request
		want    error
		reason  string
		asked   int // store reads
		open    int // streams in the hub after the refusal
	}{
		{"invalid queue id", nil, Request{Queue: "Q1", User: "ann", ClientIP: "192.0.2.1"}, ErrInvalidQueue, "invalid", 0, 0},
		{"empty queue id", nil, Request{Queue: "", User: "ann", ClientIP: "192.0.2.1"}, ErrInvalidQueue, "invalid", 0, 0},
		{"another user's stream", nil, Request{Queue: "q1", User: "ann", ForUser: "bob", ClientIP: "192.0.2.1"}, ErrForeignUser, "foreign", 0, 0},
		{"unknown queue", nil, Request{Queue: "missing", User: "ann", ClientIP: "192.0.2.1"}, queue.ErrNotFound, "not_found", 1, 0},
		{"store down", func(f *fixture) { f.pos.SetDown(errStoreDown) }, Request{Queue: "q1", User: "ann", ClientIP: "192.0.2.1"}, ErrUnavailable, "unavailable", 1, 0},
		{"shutting down", func(f *fixture) { f.hub.Shut() }, Request{Queue: "q1", User: "ann", ClientIP: "192.0.2.1"}, hub.ErrShut, "shutting_down", 1, 0},
		{"user at its cap", func(f *fixture) { f.open(t, "ann", "192.0.2.7", "192.0.2.8") }, Request{Queue: "q2", User: "ann", ClientIP: "192.0.2.1"}, hub.ErrUserCap, "user_cap", 3, 2},
		{"address at its cap", func(f *fixture) { f.open(t, "bob", "192.0.2.1"); f.open(t, "cid", "192.0.2.1") }, Request{Queue: "q1", User: "ann", ClientIP: "192.0.2.1"}, hub.ErrIPCap, "ip_cap", 3, 2},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f := newFixture(8)
			if c.prepare != nil {
				c.prepare(f)
			}
			before := f.rec.snapshot()
			sub, err := f.svc.Subscribe(context.Background(), c.req)
			if !errors.Is(err, c.want) || sub != nil {
				t.Fatalf("Subscribe: %v, %v; want %v", sub, err, c.want)
			}
			want := maps.Clone(before)
			want["rejected/"+c.reason]++
			if got := f.rec.snapshot(); !maps.Equal(got, want) {
				t.Fatalf("counts %v, want %v", got, want)
			}
			if f.pos.Reads() != c.asked || f.hub.Len() != c.open {
				t.Fatalf("store read %d times, hub holds %d; want %d and %d", f.pos.Reads(), f.hub.Len(), c.asked, c.open)
			}
		})
	}
}

func TestStoreErrorIsKeptInUnavailable(t *testing.T) {
	f := newFixture(8)
	f.pos.SetDown(errStoreDown)
	_, err := f.svc.Subscribe(context.Background(), Request{Queue: "q1", User: "ann"})
	if !errors.Is(err, ErrUnavailable) || !errors.Is(err, errStoreDown) {
		t.Fatalf("err %v, want ErrUnavailable wrapping the store's error", err)
	}
}

// open opens one stream of user on q1 from each address.
func (f *fixture) open(t *testing.T, user string, addrs ...string) []*Subscription {
	t.Helper()
	var subs []*Subscription
	for _, a := range addrs {
		sub, err := f.svc.Subscribe(context.Background(), Request{Queue: "q1", User: user, ClientIP: a})
		if err != nil {
			t.Fatalf("open %s from %s: %v", user, a, err)
		}
		subs = append(subs, sub)
	}
	return subs
}

// frame is a message as the tests compare it.
type frame struct{ event, id, state, tokenID string }

func frameOf(t *testing.T, m hub.Message) frame {
	t.Helper()
	var d struct {
		State   string `json:"state"`
		TokenID string `json:"tokenId"`
		Token   string `json:"token"`
	}
	if err := json.Unmarshal(m.Data, &d); err != nil {
		t.Fatalf("%s data %q: %v", m.Event, m.Data, err)
	}
	if d.Token != "" {
		t.Fatalf("%s carries the token's secret: %q", m.Event, m.Data)
	}
	return frame{m.Event, m.ID, d.State, d.TokenID}
}

func framesOf(t *testing.T, ms []hub.Message) []frame {
	t.Helper()
	out := make([]frame, 0, len(ms))
	for _, m := range ms {
		out = append(out, frameOf(t, m))
	}
	return out
}

func TestSubscribeOpensWith(t *testing.T) {
	cases := []struct {
		name     string
		admitted string // the user's token id, if any
		forUser  string
		want     []frame
	}{
		{"a waiting user: the position", "", "", []frame{{event: "position", state: "WAITING"}}},
		{"naming oneself", "", "ann", []frame{{event: "position", state: "WAITING"}}},
		{"an admitted user: the admission, then the position", "tok-1", "",
			[]frame{{event: "admitted", id: "tok-1", tokenID: "tok-1"}, {event: "position", state: "ADMITTED", tokenID: "tok-1"}}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f := newFixture(8)
			var tok queue.Token
			if c.admitted != "" {
				tok = f.admit(t, c.admitted)
			}
			sub, err := f.svc.Subscribe(context.Background(), Request{Queue: "q1", User: "ann", ForUser: c.forUser, ClientIP: "192.0.2.1"})
			if err != nil {
				t.Fatal(err)
			}
			if got := framesOf(t, sub.First); !equalFrames(got, c.want) {
				t.Fatalf("first frames %+v, want %+v", got, c.want)
			}
			// The announced token is not announced again on this stream.
			if c.admitted != "" {
				f.svc.Admitted("q1", "ann", c.admitted, tok.ActivateAt, tok.ExpiresAt, tok.ActivateAt)
				if n := len(sub.Take()); n != 0 {
					t.Fatalf("%d messages after the event of the token the stream opened with, want 0", n)
				}
			}
			if f.hub.Len() != 1 || len(f.rec.snapshot()) != 0 {
				t.Fatalf("hub holds %d, counts %v; want 1 and none", f.hub.Len(), f.rec.snapshot())
			}
			sub.Close()
			if f.hub.Len() != 0 {
				t.Fatalf("hub holds %d after Close, want 0", f.hub.Len())
			}
		})
	}
}

func equalFrames(a, b []frame) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func TestSubscriptionCountsDeliveries(t *testing.T) {
	f := newFixture(8)
	sub := f.open(t, "ann", "192.0.2.1")[0]
	sub.Delivered(hub.Message{Event: "position"})                                   // no event time: no lag
	sub.Delivered(admittedMessage("q1", "tok", time.Now(), time.Now(), time.Now())) // an event time: its lag
	sub.WriteFailed()
	want := map[string]int{"delivered/position": 1, "delivered/admitted": 1, "lag/admitted": 1, "dropped/write": 1}
	if got := f.rec.snapshot(); !maps.Equal(got, want) {
		t.Fatalf("counts %v, want %v", got, want)
	}
}
