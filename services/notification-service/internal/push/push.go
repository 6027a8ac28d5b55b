// Package push tells people "your turn" with Web Push (RFC 8030, with the
// message encryption of RFC 8291 and the VAPID identification of RFC 8292)
// when the tab is closed: the page subscribes while its person waits, and
// on the person's TokenIssued one replica sends to every device of theirs.
//
// Encryption and VAPID signing are webpush-go's. A subscription names a
// URL the server will POST to, so only the push services' hosts are
// allowed (Endpoints); each push service host gets a steady rate, and a
// 429 or 503 with Retry-After pauses sends to it.
package push

import (
	"context"
	"crypto/ecdh"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"time"

	webpush "github.com/SherClockHolmes/webpush-go"

	"github.com/waitingroom/waitingroom/pkg/queue"
)

// ErrOff is every call's answer when push is not configured here.
var ErrOff = errors.New("push: Web Push is not configured")

// ErrInvalidQueue refuses a malformed queue id.
var ErrInvalidQueue = errors.New("push: not a valid queue id")

// ErrNoSubscription is Unsubscribe's answer for an id the user does not
// have in the queue.
var ErrNoSubscription = errors.New("push: no such subscription")

// Store keeps the subscriptions and the marks of the pushes sent
// (redisstore.Store).
type Store interface {
	SavePush(ctx context.Context, q, user, id string, sub []byte, ttl time.Duration, most int) (int, error)
	DropPush(ctx context.Context, q, user, id string) (bool, error)
	PushSubscriptions(ctx context.Context, q, user string) (map[string][]byte, error)
	ClaimPush(ctx context.Context, q, tokenID string, until time.Time) (bool, error)
	UnclaimPush(ctx context.Context, q, tokenID string) error
	EndPush(ctx context.Context, q, user string, at time.Time) error
}

// Config is how the service pushes.
type Config struct {
	// PublicKey and PrivateKey are the VAPID key pair: the uncompressed
	// P-256 public key and the private scalar, base64url.
	PublicKey, PrivateKey string
	// Subject is the VAPID contact: a mailto: or https: URL.
	Subject string
	// Endpoints are the push services sent to.
	Endpoints Endpoints
	// Rate is the sends per second to one push service host from this
	// replica, Burst how many may go at once.
	Rate  float64
	Burst int
	// Lifetime is how long a subscription is kept while its person waits
	// (renewed by each subscribe); after the "your turn" it ends with the
	// token.
	Lifetime time.Duration
	// Devices is the most subscriptions one user keeps in one queue.
	Devices int
	// Attempts is how often one device is tried on a 429, a 5xx or a
	// network error before its push is given up.
	Attempts int
	// Client sends the requests; nil is one that follows no redirect, with
	// a 10 s timeout.
	Client *http.Client
}

// CheckKeys reports whether the VAPID pair is a P-256 key pair.
func CheckKeys(public, private string) error {
	d, err := decodeKey(private)
	if err != nil || len(d) != 32 {
		return errors.New("PUSH_VAPID_PRIVATE_KEY: not a base64url 32-byte P-256 private key")
	}
	k, err := ecdh.P256().NewPrivateKey(d)
	if err != nil {
		return fmt.Errorf("PUSH_VAPID_PRIVATE_KEY: %w", err)
	}
	pub, err := decodeKey(public)
	if err != nil || string(pub) != string(k.PublicKey().Bytes()) {
		return errors.New("PUSH_VAPID_PUBLIC_KEY: not the public key of PUSH_VAPID_PRIVATE_KEY (base64url, uncompressed)")
	}
	return nil
}

// CheckSubject reports whether s is a VAPID contact URL.
func CheckSubject(s string) error {
	u, err := url.Parse(s)
	if err != nil || !(u.Scheme == "mailto" && u.Opaque != "" || u.Scheme == "https" && u.Host != "") {
		return errors.New("PUSH_SUBJECT: not a mailto: or https: URL")
	}
	return nil
}

// Service keeps subscriptions and sends the pushes. A nil *Service is push
// turned off: every call answers ErrOff.
type Service struct {
	cfg     Config
	store   Store
	log     *slog.Logger
	metrics *Metrics
	hosts   *hosts
}

// New returns the service; cfg is checked.
func New(cfg Config, store Store, log *slog.Logger, m *Metrics) (*Service, error) {
	if err := errors.Join(CheckKeys(cfg.PublicKey, cfg.PrivateKey), CheckSubject(cfg.Subject)); err != nil {
		return nil, err
	}
	if cfg.Rate <= 0 || cfg.Burst < 1 || cfg.Lifetime <= 0 || cfg.Devices < 1 || cfg.Attempts < 1 {
		return nil, errors.New("push: rate, burst, lifetime, devices and attempts must be positive")
	}
	if cfg.Client == nil {
		cfg.Client = newClient(cfg.Endpoints.Loopback)
	}
	return &Service{cfg: cfg, store: store, log: log, metrics: m, hosts: newHosts(cfg.Rate, cfg.Burst)}, nil
}

// Key is the VAPID public key a page subscribes with
// (applicationServerKey).
func (s *Service) Key() (string, error) {
	if s == nil {
		return "", ErrOff
	}
	return s.cfg.PublicKey, nil
}

// record is a stored subscription.
type record struct {
	Subscription Subscription `json:"subscription"`
	Title        string       `json:"title"`
	Body         string       `json:"body"`
	Lang         string       `json:"lang,omitempty"`
}

// Subscribe keeps r for user in q and returns its id; an *InvalidError
// names what is wrong with r, queue.ErrNotFound says q does not exist.
func (s *Service) Subscribe(ctx context.Context, q, user string, r Request) (string, error) {
	if s == nil {
		return "", ErrOff
	}
	if !queue.ValidID(q) {
		return "", ErrInvalidQueue
	}
	id, err := r.check(s.cfg.Endpoints)
	if err != nil {
		return "", err
	}
	b, err := json.Marshal(record{Subscription: Subscription{Endpoint: r.Subscription.Endpoint, Keys: r.Subscription.Keys},
		Title: r.Title, Body: r.Body, Lang: r.Lang})
	if err != nil {
		return "", err
	}
	evicted, err := s.store.SavePush(ctx, q, user, id, b, s.cfg.Lifetime, s.cfg.Devices)
	if err != nil {
		return "", err
	}
	s.metrics.subscribed(evicted)
	return id, nil
}

// Unsubscribe removes user's subscription id from q: ErrNoSubscription
// when they have none by that id.
func (s *Service) Unsubscribe(ctx context.Context, q, user, id string) error {
	if s == nil {
		return ErrOff
	}
	if !queue.ValidID(q) {
		return ErrInvalidQueue
	}
	had, err := s.store.DropPush(ctx, q, user, id)
	if err != nil {
		return err
	}
	if !had {
		return ErrNoSubscription
	}
	return nil
}

// Turn is the message a device receives (encrypted): what its service
// worker shows, and the queue whose page a click opens.
type Turn struct {
	QueueID   string `json:"queueId"`
	Title     string `json:"title"`
	Body      string `json:"body"`
	Lang      string `json:"lang,omitempty"`
	ExpiresAt int64  `json:"expiresAt"` // Unix ms: the entry's end
}

// Issued pushes "your turn" to every device user subscribed in q, once per
// token: a redelivered event finds the token's mark and sends nothing.
// It returns an error only when the store cannot be read (the event is
// worth another try); a device that cannot be reached is given up after
// its attempts, one that is gone (404, 410) is removed.
func (s *Service) Issued(ctx context.Context, q, user, tokenID string, expiresAt time.Time) error {
	if s == nil {
		return nil
	}
	if !time.Now().Before(expiresAt) {
		s.metrics.result("late")
		return nil
	}
	subs, err := s.store.PushSubscriptions(ctx, q, user)
	if err != nil || len(subs) == 0 {
		return err
	}
	first, err := s.store.ClaimPush(ctx, q, tokenID, expiresAt)
	if err != nil {
		return err
	}
	if !first {
		s.metrics.result("duplicate")
		return nil
	}
	// The token's entry ends at expiresAt: a send after it is no use, and
	// the push service keeps the message no longer.
	ctx, cancel := context.WithDeadline(ctx, expiresAt)
	defer cancel()
	undelivered := 0
	for id, b := range subs {
		var rec record
		if json.Unmarshal(b, &rec) != nil {
			s.metrics.result("failed")
			continue
		}
		msg, _ := json.Marshal(Turn{QueueID: q, Title: rec.Title, Body: rec.Body, Lang: rec.Lang, ExpiresAt: expiresAt.UnixMilli()})
		switch res := s.send(ctx, q, rec.Subscription, msg, expiresAt); res {
		case "gone":
			if _, err := s.store.DropPush(ctx, q, user, id); err != nil {
				s.log.Info("push: a gone subscription stays until it expires", "queue", q, "error", err)
			}
			s.metrics.result(res)
		case "stopped":
			undelivered++
		default:
			s.metrics.result(res)
		}
	}
	if undelivered > 0 && ctx.Err() != nil && time.Now().Before(expiresAt) {
		// The replica is stopping mid-send: another one takes the event.
		uctx, ucancel := context.WithTimeout(context.WithoutCancel(ctx), time.Second)
		defer ucancel()
		if err := s.store.UnclaimPush(uctx, q, tokenID); err != nil {
			return err
		}
		return context.Cause(ctx)
	}
	// The person had their turn: their subscriptions end with the entry.
	return s.store.EndPush(context.WithoutCancel(ctx), q, user, expiresAt)
}

// send pushes msg to one device and says how it went: sent, gone,
// refused, failed (given up after its attempts), late (the entry ended
// first) or stopped (ctx ended).
func (s *Service) send(ctx context.Context, q string, sub Subscription, msg []byte, expiresAt time.Time) string {
	if err := s.cfg.Endpoints.Check(sub.Endpoint); err != nil {
		return "refused" // stored under another PUSH_ENDPOINT_HOSTS
	}
	host := endpointHost(sub.Endpoint)
	for attempt := 1; ; attempt++ {
		if err := s.hosts.wait(ctx, host); err != nil {
			return s.ended(ctx, expiresAt)
		}
		ttl := int(time.Until(expiresAt) / time.Second)
		if ttl < 1 {
			return "late"
		}
		res, err := webpush.SendNotificationWithContext(ctx, msg, &webpush.Subscription{
			Endpoint: sub.Endpoint, Keys: webpush.Keys{P256dh: sub.Keys.P256dh, Auth: sub.Keys.Auth},
		}, &webpush.Options{
			HTTPClient: s.cfg.Client, Subscriber: strings.TrimPrefix(s.cfg.Subject, "mailto:"),
			VAPIDPublicKey: s.cfg.PublicKey, VAPIDPrivateKey: s.cfg.PrivateKey,
			TTL: ttl, Urgency: webpush.UrgencyHigh, Topic: topic(q), RecordSize: recordSize,
		})
		status := 0
		var retryAfter time.Duration
		if err == nil {
			status, retryAfter = res.StatusCode, parseRetryAfter(res.Header.Get("Retry-After"))
			drain(res)
		}
		switch {
		case err == nil && status >= 200 && status < 300:
			return "sent"
		case status == http.StatusNotFound || status == http.StatusGone:
			return "gone"
		case err != nil && ctx.Err() != nil:
			return s.ended(ctx, expiresAt)
		case err == nil && status != http.StatusTooManyRequests && status < 500:
			// 400, 401, 403, 413: this message will never be taken.
			s.log.Warn("push: the push service refused a message", "queue", q, "host", host, "status", status)
			return "refused"
		}
		if status == http.StatusTooManyRequests || status == http.StatusServiceUnavailable {
			s.hosts.pause(host, retryAfter)
		}
		if attempt >= s.cfg.Attempts {
			s.log.Info("push: a device could not be reached", "queue", q, "host", host, "status", status, "error", err)
			return "failed"
		}
		backoff := time.Duration(attempt) * time.Second
		if retryAfter > backoff {
			backoff = retryAfter
		}
		select {
		case <-ctx.Done():
			return s.ended(ctx, expiresAt)
		case <-time.After(backoff):
		}
	}
}

// ended names why a send stopped once ctx ended: the entry expired, or
// the replica is stopping.
func (s *Service) ended(ctx context.Context, expiresAt time.Time) string {
	if !time.Now().Before(expiresAt) || errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return "late"
	}
	return "stopped"
}

// recordSize is the encrypted record's size: every message is padded to
// it, so its length tells nothing of the words (1 KiB holds the longest).
const recordSize = 1024

// topic is the Topic header of q's pushes (RFC 8030 5.4): a newer one
// replaces one the push service still holds for the device. It is at
// most 32 base64url characters, so a digest of q.
func topic(q string) string {
	sum := sha256.Sum256([]byte("turn:" + q))
	return base64.RawURLEncoding.EncodeToString(sum[:24])
}

func endpointHost(endpoint string) string {
	u, err := url.Parse(endpoint)
	if err != nil {
		return ""
	}
	return strings.ToLower(u.Host)
}
