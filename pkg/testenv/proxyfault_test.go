package testenv

import (
	"bufio"
	"errors"
	"io"
	"net"
	"strings"
	"testing"
	"time"
)

// The fault tests of other packages lean on these two: a reply held past a
// client's timeout must really be late, only once, and only on the
// connection that asked; a delay must slow every reply until turned off.
// Times are checked as lower bounds (the proxy waited at least this long),
// plus upper bounds far from the injected delay, where "not delayed" is
// told apart from "delayed by seconds".

// roundTrip sends line on c and returns the echo and how long it took.
func roundTrip(t *testing.T, c net.Conn, r *bufio.Reader, line string) (string, time.Duration) {
	t.Helper()
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	start := time.Now()
	if _, err := io.WriteString(c, line+"\n"); err != nil {
		t.Fatalf("write %q: %v", line, err)
	}
	got, err := r.ReadString('\n')
	if err != nil {
		t.Fatalf("read echo of %q: %v", line, err)
	}
	return strings.TrimSuffix(got, "\n"), time.Since(start)
}

func TestProxyDelaySlowsEveryReplyUntilTurnedOff(t *testing.T) {
	t.Parallel()
	p := StartProxy(t, startEcho(t))
	c := dialEcho(t, p.Addr())
	r := bufio.NewReader(c)

	const d = 2 * time.Second
	p.Delay(d)
	for i, line := range []string{"one", "two"} {
		got, took := roundTrip(t, c, r, line)
		if got != line || took < d {
			t.Fatalf("reply %d with Delay(%v): %q after %v; want %q after at least %v", i, d, got, took, line, d)
		}
	}
	// A connection opened while the delay is on is slowed too.
	c2 := dialEcho(t, p.Addr())
	if got, took := roundTrip(t, c2, bufio.NewReader(c2), "new"); got != "new" || took < d {
		t.Fatalf("new connection with Delay(%v): %q after %v", d, got, took)
	}
	p.Delay(0)
	if got, took := roundTrip(t, c, r, "three"); got != "three" || took >= d/2 {
		t.Fatalf("reply after Delay(0): %q after %v; want it well under %v", got, took, d)
	}
	if p.Held() != 0 {
		t.Fatalf("Held() = %d after delays only, want 0", p.Held())
	}
}

func TestProxyHoldNextReplyHoldsOneMatchingReplyOnce(t *testing.T) {
	t.Parallel()
	p := StartProxy(t, startEcho(t))
	a := dialEcho(t, p.Addr())
	ra := bufio.NewReader(a)
	b := dialEcho(t, p.Addr())
	rb := bufio.NewReader(b)

	const d = 2 * time.Second
	p.HoldNextReply(func(req []byte) bool { return strings.HasPrefix(string(req), "hold") }, d)

	// A request that does not match passes at once and leaves the hold armed.
	if got, took := roundTrip(t, a, ra, "pass"); got != "pass" || took >= d/2 || p.Held() != 0 {
		t.Fatalf("non-matching request: %q after %v, Held %d; want it unheld", got, took, p.Held())
	}
	// The matching request's reply is held; another connection meanwhile
	// is not.
	type result struct {
		got  string
		took time.Duration
	}
	heldDone := make(chan result, 1)
	go func() {
		_ = a.SetDeadline(time.Now().Add(10 * time.Second))
		start := time.Now()
		if _, err := io.WriteString(a, "hold me\n"); err != nil {
			heldDone <- result{got: err.Error()}
			return
		}
		got, err := ra.ReadString('\n')
		if err != nil {
			got = err.Error()
		}
		heldDone <- result{strings.TrimSuffix(got, "\n"), time.Since(start)}
	}()
	WaitFor(t, 5*time.Second, "the matching request to be held", func() bool { return p.Held() == 1 })
	if got, took := roundTrip(t, b, rb, "other"); got != "other" || took >= d/2 {
		t.Fatalf("other connection during the hold: %q after %v; want it unheld", got, took)
	}
	res := <-heldDone
	if res.got != "hold me" || res.took < d {
		t.Fatalf("held reply: %q after %v; want %q after at least %v", res.got, res.took, "hold me", d)
	}
	// Once only: the same request again passes at once.
	if got, took := roundTrip(t, a, ra, "hold again"); got != "hold again" || took >= d/2 || p.Held() != 1 {
		t.Fatalf("second matching request: %q after %v, Held %d; want it unheld and Held 1", got, took, p.Held())
	}
}

func TestProxyClientThatGaveUpOnAHeldReplyRetriesUnheld(t *testing.T) {
	t.Parallel()
	p := StartProxy(t, startEcho(t))
	const d = time.Second
	p.HoldNextReply(func([]byte) bool { return true }, d)

	// A client with a shorter timeout than the hold gives up and closes,
	// as go-redis does, and asks again on a new connection.
	a := dialEcho(t, p.Addr())
	_ = a.SetReadDeadline(time.Now().Add(200 * time.Millisecond))
	if _, err := io.WriteString(a, "first\n"); err != nil {
		t.Fatal(err)
	}
	_, err := bufio.NewReader(a).ReadString('\n')
	var ne net.Error
	if !errors.As(err, &ne) || !ne.Timeout() {
		t.Fatalf("read of the held reply: %v, want a timeout", err)
	}
	_ = a.Close()
	b := dialEcho(t, p.Addr())
	if got, took := roundTrip(t, b, bufio.NewReader(b), "first"); got != "first" || took >= d/2 {
		t.Fatalf("the retry on a new connection: %q after %v; want it unheld", got, took)
	}
	if p.Held() != 1 {
		t.Fatalf("Held() = %d, want 1", p.Held())
	}
}
