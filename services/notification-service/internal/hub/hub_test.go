package hub_test

import (
	"errors"
	"fmt"
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
