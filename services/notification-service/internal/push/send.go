package push

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"strconv"
	"sync"
	"syscall"
	"time"

	"golang.org/x/time/rate"
)

// hosts paces the sends to each push service host: a steady rate, and a
// pause when the host asked for one (429 or 503 with Retry-After).
type hosts struct {
	rate  rate.Limit
	burst int
	mu    sync.Mutex
	by    map[string]*host
}

type host struct {
	limiter *rate.Limiter
	until   time.Time // paused until
}

// maxPause bounds a push service's Retry-After: an entry lasts minutes.
const maxPause = time.Minute

func newHosts(perSecond float64, burst int) *hosts {
	return &hosts{rate: rate.Limit(perSecond), burst: burst, by: map[string]*host{}}
}

func (hs *hosts) get(name string) *host {
	hs.mu.Lock()
	defer hs.mu.Unlock()
	h := hs.by[name]
	if h == nil {
		h = &host{limiter: rate.NewLimiter(hs.rate, hs.burst)}
		hs.by[name] = h
	}
	return h
}

// wait returns when a send to name may go, or ctx's error.
func (hs *hosts) wait(ctx context.Context, name string) error {
	h := hs.get(name)
	hs.mu.Lock()
	d := time.Until(h.until)
	hs.mu.Unlock()
	if d > 0 {
		t := time.NewTimer(d)
		defer t.Stop()
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
	}
	return h.limiter.Wait(ctx)
}

// pause holds the sends to name for d (a second when the host gave none).
func (hs *hosts) pause(name string, d time.Duration) {
	if d <= 0 {
		d = time.Second
	}
	d = min(d, maxPause)
	h := hs.get(name)
	hs.mu.Lock()
	defer hs.mu.Unlock()
	if until := time.Now().Add(d); until.After(h.until) {
		h.until = until
	}
}

// parseRetryAfter reads Retry-After in seconds or as an HTTP date.
func parseRetryAfter(v string) time.Duration {
	if v == "" {
		return 0
	}
	if s, err := strconv.Atoi(v); err == nil && s >= 0 {
		return time.Duration(s) * time.Second
	}
	if t, err := http.ParseTime(v); err == nil {
		return time.Until(t)
	}
	return 0
}

// drain reads a little of a response and closes it, so its connection
// is reused.
func drain(res *http.Response) {
	_, _ = io.Copy(io.Discard, io.LimitReader(res.Body, 4<<10))
	_ = res.Body.Close()
}

// errPrivate refuses a connection to an address that is not public.
var errPrivate = errors.New("push: the endpoint's address is not a public one")

// newClient sends to push services only: no redirect is followed (a push
// service answers, it does not send elsewhere), and the dialer refuses
// addresses that are not public (loopback, private, link-local), so a name
// under an allowed host that resolves inward is not reached. loopback
// allows 127.0.0.1 and ::1 (tests).
func newClient(loopback bool) *http.Client {
	d := &net.Dialer{Timeout: 5 * time.Second, Control: func(_, address string, _ syscall.RawConn) error {
		h, _, err := net.SplitHostPort(address)
		if err != nil {
			return err
		}
		ip := net.ParseIP(h)
		switch {
		case ip == nil:
			return errPrivate
		case ip.IsLoopback() && loopback:
			return nil
		case ip.IsLoopback(), ip.IsPrivate(), ip.IsLinkLocalUnicast(), ip.IsLinkLocalMulticast(), ip.IsUnspecified(), ip.IsMulticast():
			return errPrivate
		}
		return nil
	}}
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.DialContext = d.DialContext
	t.Proxy = nil // the push services are reached directly
	t.MaxIdleConnsPerHost = 32
	return &http.Client{
		Transport: t,
		Timeout:   10 * time.Second,
		CheckRedirect: func(*http.Request, []*http.Request) error {
			return http.ErrUseLastResponse
		},
	}
}
