package stream

import (
	"context"
	"maps"
	"slices"
	"sync"
	"testing"
	"time"
)

// drain takes what is queued on sub without waiting.
func drain(t *testing.T, sub *Subscription) []frame {
	t.Helper()
	var out []frame
	for _, m := range sub.Take() {
		out = append(out, frameOf(t, m))
	}
	return out
}

func TestAdmittedAnnouncesEachTokenOncePerStream(t *testing.T) {
	admitted := func(id string) frame { return frame{event: "admitted", id: id, tokenID: id} }
	cases := []struct {
		name   string
		tokens []string // Admitted events for ann, in order
		want   []frame  // on each of ann's streams
	}{
		{"one event", []string{"tok-1"}, []frame{admitted("tok-1")}},
		{"the same token twice (issued, then redelivered)", []string{"tok-1", "tok-1"}, []frame{admitted("tok-1")}},
		{"a restored token after the first", []string{"tok-1", "tok-2", "tok-1"}, []frame{admitted("tok-1"), admitted("tok-2")}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f := newFixture(8)
			anns := f.open(t, "ann", "192.0.2.1", "192.0.2.2")
			bob := f.open(t, "bob", "192.0.2.3")[0]
			for _, tok := range c.tokens {
				f.svc.Admitted("q1", "ann", tok, time.Now(), time.Now().Add(time.Minute), time.Now())
			}
			for i, sub := range anns {
				if got := drain(t, sub); !equalFrames(got, c.want) {
					t.Fatalf("ann's stream %d got %+v, want %+v", i, got, c.want)
				}
			}
			if got := drain(t, bob); len(got) != 0 {
				t.Fatalf("bob's stream got %+v, want nothing", got)
			}
			if f.hub.Len() != 3 || len(f.rec.snapshot()) != 0 {
				t.Fatalf("hub holds %d, counts %v; want 3 and none", f.hub.Len(), f.rec.snapshot())
			}
		})
	}
}

func TestAdmittedDropsAStreamThatDoesNotRead(t *testing.T) {
	f := newFixture(1)
	slow := f.open(t, "ann", "192.0.2.1")[0]
	f.svc.Admitted("q1", "ann", "tok-1", time.Now(), time.Now(), time.Now()) // fills the buffer of one
	f.svc.Admitted("q1", "ann", "tok-2", time.Now(), time.Now(), time.Now()) // finds it full
	if !slow.Closed() {
		t.Fatal("the full stream is still open")
	}
	if want, got := map[string]int{"dropped/slow": 1}, f.rec.snapshot(); f.hub.Len() != 0 || !maps.Equal(got, want) {
		t.Fatalf("hub holds %d, counts %v; want 0 and %v", f.hub.Len(), got, want)
	}
}

func TestPositionRound(t *testing.T) {
	position := frame{event: "position", state: "WAITING"}
	cases := []struct {
		name   string
		admit  string // token id for ann before the rounds, if any
		down   bool
		rounds int
		want   map[string][]frame // per user, over all rounds
	}{
		{"everyone waiting", "", false, 2, map[string][]frame{"ann": {position, position}, "bob": {position, position}}},
		{"an admission the stream missed is announced once", "tok-1", false, 2, map[string][]frame{
			"ann": {{event: "admitted", id: "tok-1", tokenID: "tok-1"}, {event: "position", state: "ADMITTED", tokenID: "tok-1"},
				{event: "position", state: "ADMITTED", tokenID: "tok-1"}},
			"bob": {position, position}}},
		{"the store down: nothing sent, nobody dropped", "", true, 2, map[string][]frame{"ann": nil, "bob": nil}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f := newFixture(8)
			subs := map[string]*Subscription{"ann": f.open(t, "ann", "192.0.2.1")[0], "bob": f.open(t, "bob", "192.0.2.2")[0]}
			for _, sub := range subs {
				drain(t, sub) // nothing yet: the opening frames are in First
			}
			if c.admit != "" {
				f.admit(t, c.admit)
			}
			if c.down {
				f.pos.SetDown(errStoreDown)
			}
			f.pos.ResetReads()
			for range c.rounds {
				f.svc.round(context.Background())
			}
			for user, sub := range subs {
				if got := drain(t, sub); !equalFrames(got, c.want[user]) {
					t.Fatalf("%s got %+v, want %+v", user, got, c.want[user])
				}
			}
			// One read per queue per round, whoever is connected.
			if f.pos.Reads() != c.rounds || f.hub.Len() != 2 || len(f.rec.snapshot()) != 0 {
				t.Fatalf("store read %d times, hub holds %d, counts %v; want %d, 2 and none", f.pos.Reads(), f.hub.Len(), f.rec.snapshot(), c.rounds)
			}
		})
	}
}

func TestPositionRoundDropsAFullStream(t *testing.T) {
	f := newFixture(1)
	ann := f.open(t, "ann", "192.0.2.1")[0]
	f.svc.round(context.Background()) // fills ann's buffer of one
	f.svc.round(context.Background()) // finds it full
	if !ann.Closed() {
		t.Fatal("the full stream is still open")
	}
	if want, got := map[string]int{"dropped/slow": 1}, f.rec.snapshot(); f.hub.Len() != 0 || !maps.Equal(got, want) {
		t.Fatalf("hub holds %d, counts %v; want 0 and %v", f.hub.Len(), got, want)
	}
}

// sawLog records the sightings a position round notes.
type sawLog struct {
	mu  sync.Mutex
	saw []string
}

func (s *sawLog) Saw(q, user string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.saw = append(s.saw, q+"/"+user)
}

// An open stream keeps its holder present: each round notes everyone it
// finds in line, and nobody admitted or out of the store's reach.
func TestPositionRoundNotesThePeopleInLineAsSeen(t *testing.T) {
	f := newFixture(8)
	saw := &sawLog{}
	f.svc.WithSightings(saw)
	for _, u := range []string{"ann", "bob"} {
		drain(t, f.open(t, u, "192.0.2."+map[string]string{"ann": "1", "bob": "2"}[u])[0])
	}
	f.admit(t, "tok-1") // ann is through: no longer waiting
	f.svc.round(context.Background())
	f.svc.round(context.Background())
	f.pos.SetDown(errStoreDown)
	f.svc.round(context.Background())
	saw.mu.Lock()
	defer saw.mu.Unlock()
	if want := []string{"q1/bob", "q1/bob"}; !slices.Equal(saw.saw, want) {
		t.Fatalf("sightings %v, want %v (bob once a round while the store answers)", saw.saw, want)
	}
}
