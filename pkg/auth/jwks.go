package auth

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/MicahParks/jwkset"
)

// JWKS names an identity provider's JSON Web Key Set (see WithJWKS).
type JWKS struct {
	// URL is where the set is fetched, e.g. Keycloak's
	// .../protocol/openid-connect/certs.
	URL string
	// Refresh is how often the set is fetched again; 0 means DefaultJWKSRefresh.
	Refresh time.Duration
	// Client fetches the set; nil means one with FetchTimeout.
	Client *http.Client
	// Log receives failed fetches and skipped keys; nil discards them.
	Log *slog.Logger
}

// JWKS timings. The set is fetched at start, every Refresh after that, and
// again when a token names a kid the set does not hold (a key rotation), but
// that on-demand fetch at most once per UnknownKIDInterval, so junk kids
// cannot make the service hammer the provider. While fetches fail (the
// provider unreachable at start-up, say) they are retried after 1 s, 2 s, 4 s
// ... up to maxRetryWait; the keys already fetched stay in use meanwhile.
const (
	DefaultJWKSRefresh = 15 * time.Minute
	UnknownKIDInterval = 10 * time.Second
	FetchTimeout       = 5 * time.Second
	firstRetryWait     = time.Second
	maxRetryWait       = 30 * time.Second
	// maxJWKSBytes bounds the body read: real sets are a few kilobytes.
	maxJWKSBytes = 1 << 20
)

// keySet is a JWKS cached in memory: a map from kid to pinned key that is
// replaced whole by each successful fetch.
type keySet struct {
	url     string
	client  *http.Client
	every   time.Duration
	log     *slog.Logger
	now     func() time.Time
	ctx     context.Context // ends the background loop and any fetch
	stop    context.CancelFunc
	stopped chan struct{}

	keys atomic.Pointer[map[string]*publicKey]

	mu        sync.Mutex
	inflight  *flight   // the fetch running now, which callers join
	lastKick  time.Time // when a token's unknown kid last started a fetch
	lastError error     // of the latest fetch, for Ready
}

// flight is one fetch that several callers may wait for.
type flight struct {
	done chan struct{}
	err  error
}

func newKeySet(ctx context.Context, j JWKS, now func() time.Time) *keySet {
	s := &keySet{url: j.URL, client: j.Client, every: j.Refresh, log: j.Log, now: now, stopped: make(chan struct{})}
	if s.client == nil {
		s.client = &http.Client{Timeout: FetchTimeout}
	}
	if s.every <= 0 {
		s.every = DefaultJWKSRefresh
	}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	s.ctx, s.stop = context.WithCancel(ctx)
	s.lastError = errors.New("not fetched yet")
	go s.run()
	return s
}

// run fetches the set now and then every s.every, sooner after a failure,
// until s.ctx ends.
func (s *keySet) run() {
	defer close(s.stopped)
	retry := min(firstRetryWait, s.every)
	timer := time.NewTimer(0)
	defer timer.Stop()
	for {
		select {
		case <-s.ctx.Done():
			return
		case <-timer.C:
		}
		if err := s.refresh(false); err != nil {
			if s.ctx.Err() != nil {
				return
			}
			s.log.Warn("auth: JWKS fetch failed; keys fetched before stay in use", "url", s.url, "err", err, "retry_in", retry)
			timer.Reset(retry)
			retry = min(2*retry, maxRetryWait, s.every)
			continue
		}
		retry = min(firstRetryWait, s.every)
		timer.Reset(s.every)
	}
}

// close stops the background loop and waits for it.
func (s *keySet) close() {
	s.stop()
	<-s.stopped
}

// key returns the key named kid, fetching the set once more when kid is
// unknown and no token started such a fetch in the last UnknownKIDInterval.
func (s *keySet) key(kid string) (*publicKey, error) {
	if k := s.current(kid); k != nil {
		return k, nil
	}
	if err := s.refresh(true); err != nil {
		return nil, fmt.Errorf("kid %q is not in the JWKS: %w", kid, err)
	}
	if k := s.current(kid); k != nil {
		return k, nil
	}
	return nil, fmt.Errorf("kid %q is not in the JWKS", kid)
}

// current is the key named kid in the last fetched set, or nil.
func (s *keySet) current(kid string) *publicKey {
	if m := s.keys.Load(); m != nil {
		return (*m)[kid]
	}
	return nil
}

var errFetchLimited = fmt.Errorf("the JWKS was fetched for an unknown kid less than %s ago", UnknownKIDInterval)

// refresh fetches the set, or waits for the fetch already running. A
// limited caller (a token's unknown kid) starts a fetch only once per
// UnknownKIDInterval; joining a running one is free.
func (s *keySet) refresh(limited bool) error {
	s.mu.Lock()
	f := s.inflight
	if f == nil {
		if limited {
			now := s.now()
			if !s.lastKick.IsZero() && now.Sub(s.lastKick) < UnknownKIDInterval {
				s.mu.Unlock()
				return errFetchLimited
			}
			s.lastKick = now
		}
		f = &flight{done: make(chan struct{})}
		s.inflight = f
		s.mu.Unlock()
		f.err = s.fetch()
		s.mu.Lock()
		s.inflight, s.lastError = nil, f.err
		s.mu.Unlock()
		close(f.done)
		return f.err
	}
	s.mu.Unlock()
	<-f.done // a fetch ends within FetchTimeout, or when s.ctx does
	return f.err
}

// fetch reads the set and replaces the keys. A set that cannot be read, or
// holds no usable signing key, changes nothing.
func (s *keySet) fetch() error {
	ctx, cancel := context.WithTimeout(s.ctx, FetchTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.url, nil)
	if err != nil {
		return err
	}
	req.Header.Set("Accept", "application/jwk-set+json, application/json")
	res, err := s.client.Do(req)
	if err != nil {
		return err
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: status %d", s.url, res.StatusCode)
	}
	var set jwkset.JWKSMarshal
	if err := json.NewDecoder(io.LimitReader(res.Body, maxJWKSBytes)).Decode(&set); err != nil {
		return fmt.Errorf("GET %s: %w", s.url, err)
	}
	var old map[string]*publicKey
	if m := s.keys.Load(); m != nil {
		old = *m
	}
	keys := make(map[string]*publicKey, len(set.Keys))
	for _, m := range set.Keys {
		k, err := pin(m)
		if err == nil && keys[m.KID] != nil {
			err = errors.New("a second key with this kid")
		}
		if err != nil {
			s.log.Debug("auth: JWKS key skipped", "url", s.url, "kid", m.KID, "kty", m.KTY, "use", m.USE, "alg", m.ALG, "err", err)
			continue
		}
		if o := old[k.kid]; o.same(k) {
			k = o // cached tokens stay valid while their key does
		}
		keys[k.kid] = k
	}
	if len(keys) == 0 {
		return fmt.Errorf("GET %s: no usable signing key among %d", s.url, len(set.Keys))
	}
	s.keys.Store(&keys)
	return nil
}

// ready is nil once a fetch succeeded.
func (s *keySet) ready() error {
	if s.keys.Load() != nil {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return fmt.Errorf("auth: no keys from the JWKS at %s yet: %w", s.url, s.lastError)
}
