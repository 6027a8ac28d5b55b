package hub_test

import (
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"

	"github.com/waitingroom/waitingroom/services/notification-service/internal/hub"
)

// Fifty concurrent opens of one user over five queues: exactly the cap gets
// a stream, and closing them frees the user's budget again.
func TestUserCapHoldsUnderConcurrentOpens(t *testing.T) {
	h := hub.New(4, 0, hub.MaxPerUser(3))
	const n = 50
	streams := make([]*hub.Stream, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { streams[i], errs[i] = h.Open(fmt.Sprint("q", i%5), "u", fmt.Sprintf("2001:db8:%x::1", i)) })
	}
	wg.Wait()
	opened, capped := 0, 0
	for i, err := range errs {
		switch {
		case err == nil && streams[i] != nil:
			opened++
		case errors.Is(err, hub.ErrUserCap) && streams[i] == nil:
			capped++
		default:
			t.Errorf("open %d: %v", i, err)
		}
	}
	if opened != 3 || capped != n-3 || h.Len() != 3 {
		t.Fatalf("%d opened, %d capped, hub holds %d; want 3, %d, 3", opened, capped, h.Len(), n-3)
	}
	for _, s := range streams {
		if s != nil {
			h.Close(s)
			h.Close(s) // a second close changes nothing
		}
	}
	if h.Len() != 0 {
		t.Fatalf("hub holds %d after closing all, want 0", h.Len())
	}
	for i := range 3 {
		if _, err := h.Open("q9", "u", fmt.Sprint("198.51.100.", i)); err != nil {
			t.Fatalf("reopen %d: %v", i, err)
		}
	}
	if _, err := h.Open("q9", "u", "198.51.100.9"); !errors.Is(err, hub.ErrUserCap) {
		t.Fatalf("4th after reopening: %v, want ErrUserCap", err)
	}
}

func TestIPCapCountsByClientKey(t *testing.T) {
	tests := []struct {
		name  string
		opts  []hub.Option
		addrs []string
		open  int
	}{
		{"one /64 at the default", nil, []string{"2001:db8::1", "2001:db8::2", "2001:db8::ffff:1", "2001:DB8::3"}, 2},
		{"four /64s at the default", nil, []string{"2001:db8:0:1::1", "2001:db8:0:2::1", "2001:db8:0:3::1", "2001:db8:0:4::1"}, 4},
		{"four /64s of one /48 at /48", []hub.Option{hub.IPv6Prefix(48)}, []string{"2001:db8:0:1::1", "2001:db8:0:2::1", "2001:db8:0:3::1", "2001:db8:0:4::1"}, 2},
		{"one /64 at /128", []hub.Option{hub.IPv6Prefix(128)}, []string{"2001:db8::1", "2001:db8::2", "2001:db8::ffff:1", "2001:db8::3"}, 4},
		{"one IPv4 address, mapped or not", nil, []string{"192.0.2.1", "::ffff:192.0.2.1", "::ffff:c000:201", "192.0.2.1"}, 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := hub.New(4, 2, tt.opts...)
			open := 0
			var last *hub.Stream
			for i, a := range tt.addrs {
				s, err := h.Open("q", fmt.Sprint("user", i), a)
				switch {
				case err == nil:
					open++
					last = s
				case !errors.Is(err, hub.ErrIPCap):
					t.Fatalf("open from %s: %v", a, err)
				}
			}
			if open != tt.open {
				t.Fatalf("%d open of %d, want %d", open, len(tt.addrs), tt.open)
			}
			// Closing one frees a place for its client.
			h.Close(last)
			if _, err := h.Open("q", "late", last.IP); err != nil {
				t.Fatalf("open after a close from %s: %v", last.IP, err)
			}
		})
	}
}

// sink counts what a stream tells it.
type sink struct {
	mu            sync.Mutex
	ready, closed int
}

func (s *sink) Ready()  { s.mu.Lock(); s.ready++; s.mu.Unlock() }
func (s *sink) Closed() { s.mu.Lock(); s.closed++; s.mu.Unlock() }

func (s *sink) counts() (ready, closed int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.ready, s.closed
}

func events(ms []hub.Message) []string {
	var out []string
	for _, m := range ms {
		out = append(out, m.Event)
	}
	return out
}

// A stream is a mailbox of at most the buffer's messages: Offer refuses
// the one past it, Take empties it in order, and the attached sink hears
// of every message and of the close, once.
func TestStreamMailbox(t *testing.T) {
	h := hub.New(3, 0)
	s, err := h.Open("q", "ann", "192.0.2.1")
	if err != nil {
		t.Fatal(err)
	}
	// Before a sink is attached, messages wait.
	for _, e := range []string{"a", "b"} {
		if !hub.Offer(s, hub.Message{Event: e}) {
			t.Fatalf("offer %s refused", e)
		}
	}
	var k sink
	s.Attach(&k)
	if r, c := k.counts(); r != 1 || c != 0 {
		t.Fatalf("attached with 2 waiting: ready %d closed %d, want 1 and 0", r, c)
	}
	if !hub.Offer(s, hub.Message{Event: "c"}) || hub.Offer(s, hub.Message{Event: "d"}) {
		t.Fatal("the third message must be taken and the fourth refused (buffer of 3)")
	}
	if got := events(s.Take()); !slices.Equal(got, []string{"a", "b", "c"}) {
		t.Fatalf("took %v, want [a b c]", got)
	}
	if got := s.Take(); got != nil {
		t.Fatalf("took %v from an empty stream, want nothing", got)
	}
	if !hub.Offer(s, hub.Message{Event: "e"}) {
		t.Fatal("offer after a take refused")
	}
	if r, _ := k.counts(); r != 3 {
		t.Fatalf("ready %d times, want 3 (the attach and two offers)", r)
	}

	h.Close(s)
	h.Close(s)
	if r, c := k.counts(); r != 3 || c != 1 || !s.Closed() || h.Len() != 0 {
		t.Fatalf("after two closes: ready %d closed %d, Closed %v, hub holds %d; want 3, 1, true, 0", r, c, s.Closed(), h.Len())
	}
	// A closed stream takes nothing, and is not full: no slow drop for it.
	if !hub.Offer(s, hub.Message{Event: "f"}) || s.Take() != nil {
		t.Fatal("a closed stream took a message")
	}
	// A sink attached after the close hears of it at once.
	var late sink
	s.Attach(&late)
	if r, c := late.counts(); r != 0 || c != 1 {
		t.Fatalf("attached after the close: ready %d closed %d, want 0 and 1", r, c)
	}
}

// Shut closes every stream's sink and refuses new streams.
func TestShutClosesEverySink(t *testing.T) {
	h := hub.New(4, 0)
	sinks := make([]*sink, 10)
	for i := range sinks {
		s, err := h.Open("q", fmt.Sprint("u", i), "192.0.2.1")
		if err != nil {
			t.Fatal(err)
		}
		sinks[i] = &sink{}
		s.Attach(sinks[i])
	}
	h.Shut()
	for i, k := range sinks {
		if _, c := k.counts(); c != 1 {
			t.Errorf("sink %d closed %d times, want 1", i, c)
		}
	}
	if _, err := h.Open("q", "late", "192.0.2.1"); !errors.Is(err, hub.ErrShut) || h.Len() != 0 {
		t.Fatalf("open after Shut: %v, hub holds %d; want ErrShut and 0", err, h.Len())
	}
}
