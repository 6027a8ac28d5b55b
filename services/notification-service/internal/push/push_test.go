package push

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	webpush "github.com/SherClockHolmes/webpush-go"

	"github.com/waitingroom/waitingroom/pkg/queue"
	"github.com/waitingroom/waitingroom/pkg/redisstore"
	"github.com/waitingroom/waitingroom/pkg/testenv"
	"github.com/waitingroom/waitingroom/pkg/testenv/pushtest"
)

// world is a push service on loopback, a queue in the real Redis and a
// Service that sends to it.
type world struct {
	t      *testing.T
	store  *redisstore.Store
	svc    *Service
	server *pushtest.Server
	q      string
}

func newWorld(t *testing.T, opts ...func(*Config)) *world {
	t.Helper()
	store, err := redisstore.NewStore(testenv.Redis(t))
	if err != nil {
		t.Fatal(err)
	}
	return newWorldOn(t, store, opts...)
}

func newWorldOn(t *testing.T, store *redisstore.Store, opts ...func(*Config)) *world {
	t.Helper()
	private, public, err := webpush.GenerateVAPIDKeys()
	if err != nil {
		t.Fatal(err)
	}
	cfg := Config{PublicKey: public, PrivateKey: private, Subject: "mailto:ops@shop.example",
		Endpoints: Endpoints{Loopback: true}, Rate: 1000, Burst: 100, Lifetime: time.Hour, Devices: 3, Attempts: 3}
	for _, o := range opts {
		o(&cfg)
	}
	svc, err := New(cfg, store, slog.New(slog.NewTextHandler(io.Discard, nil)), nil)
	if err != nil {
		t.Fatal(err)
	}
	q := testenv.ID(t)
	if _, _, err := store.UpdateConfig(context.Background(), q, func(c queue.Config, _ bool) (queue.Config, error) { return c, nil }); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = store.Purge(context.Background(), q) })
	return &world{t: t, store: store, svc: svc, server: pushtest.NewServer(t, public), q: q}
}

// subscribe subscribes a new device of user, named name, and returns it.
func (w *world) subscribe(user, name string) (*pushtest.Device, string) {
	w.t.Helper()
	d := pushtest.NewDevice()
	p256dh, auth := d.Keys()
	id, err := w.svc.Subscribe(context.Background(), w.q, user, Request{
		Subscription: Subscription{Endpoint: w.server.Endpoint(name, d), Keys: Keys{P256dh: p256dh, Auth: auth}},
		Title:        "C'est votre tour – " + name, Body: "Commandez dans les 5 minutes.", Lang: "fr",
	})
	if err != nil {
		w.t.Fatalf("subscribe %s: %v", name, err)
	}
	return d, id
}

func (w *world) subscriptions(user string) map[string][]byte {
	w.t.Helper()
	m, err := w.store.PushSubscriptions(context.Background(), w.q, user)
	if err != nil {
		w.t.Fatal(err)
	}
	return m
}

// TestYourTurnReachesEveryDeviceEncryptedAndSigned: a person with two
// devices gets "your turn" on both, each message decrypted with that
// device's keys into the words it subscribed with, signed with the VAPID
// key for the push service's origin, with a TTL no longer than the entry,
// high urgency and the queue's topic; another person's device gets
// nothing. The event delivered again (RabbitMQ redelivers) pushes nothing
// more, and the subscriptions now end with the token.
func TestYourTurnReachesEveryDeviceEncryptedAndSigned(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	w.subscribe("ann", "ann-phone")
	w.subscribe("ann", "ann-laptop")
	w.subscribe("bob", "bob-phone")
	expires := time.Now().Add(5 * time.Minute)
	for range 2 {
		if err := w.svc.Issued(context.Background(), w.q, "ann", "tok-ann-1", expires); err != nil {
			t.Fatal(err)
		}
	}
	got := w.server.Received()
	if len(got) != 2 {
		t.Fatalf("%d messages received, want 2 (one per device of ann's, once): %+v", len(got), got)
	}
	var devices []string
	for _, m := range got {
		if m.Err != nil {
			t.Fatalf("message for %s: %v", m.Device, m.Err)
		}
		devices = append(devices, m.Device)
		var turn Turn
		if err := json.Unmarshal(m.Plain, &turn); err != nil {
			t.Fatalf("message for %s is not a Turn: %q", m.Device, m.Plain)
		}
		want := Turn{QueueID: w.q, Title: "C'est votre tour – " + m.Device, Body: "Commandez dans les 5 minutes.", Lang: "fr", ExpiresAt: expires.UnixMilli()}
		if turn != want {
			t.Errorf("%s decrypted %+v, want %+v", m.Device, turn, want)
		}
		if m.TTL < 240 || m.TTL > 300 {
			t.Errorf("%s: TTL %d s, want the entry's remaining 5 minutes", m.Device, m.TTL)
		}
		if m.Urgency != "high" || m.Topic != topic(w.q) || len(m.Topic) > 32 {
			t.Errorf("%s: urgency %q topic %q, want high and %q (at most 32 characters)", m.Device, m.Urgency, m.Topic, topic(w.q))
		}
		if m.Subject != "mailto:ops@shop.example" {
			t.Errorf("%s: VAPID sub %q", m.Device, m.Subject)
		}
		if m.Size != got[0].Size {
			t.Errorf("%s: %d bytes, %s %d: the padding should make every message alike", m.Device, m.Size, got[0].Device, got[0].Size)
		}
	}
	slices.Sort(devices)
	if !slices.Equal(devices, []string{"ann-laptop", "ann-phone"}) {
		t.Errorf("devices reached %v, want ann's two", devices)
	}
	if n := w.server.Tries("bob-phone"); n != 0 {
		t.Errorf("bob's device got %d requests, want 0", n)
	}
	ttl := testenv.Redis(t).PTTL(context.Background(), redisstore.KeysFor(w.q).Push("ann")).Val()
	if ttl <= 0 || ttl > time.Until(expires)+time.Second {
		t.Errorf("ann's subscriptions live %v more, want until the token expires (%v)", ttl, time.Until(expires))
	}
	if ttl := testenv.Redis(t).PTTL(context.Background(), redisstore.KeysFor(w.q).Push("bob")).Val(); ttl < 59*time.Minute {
		t.Errorf("bob's subscription lives %v more, want the hour it was saved for", ttl)
	}
}

// TestAGoneDeviceIsRemovedAndABusyOneWaitedFor: a push service answering
// 410 for one device has it removed at once; one answering 429 with
// Retry-After 1 is asked again no sooner than a second later, and the
// message is taken then, once. A device that keeps failing with 500 is
// tried Attempts times and given up, its subscription kept.
func TestAGoneDeviceIsRemovedAndABusyOneWaitedFor(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	_, goneID := w.subscribe("ann", "gone")
	w.subscribe("ann", "busy")
	_, brokenID := w.subscribe("ann", "broken")
	var mu sync.Mutex
	var busyAt []time.Time
	w.server.Answer(func(device string, try int) (int, http.Header) {
		switch device {
		case "gone":
			return http.StatusGone, nil
		case "broken":
			return http.StatusInternalServerError, nil
		case "busy":
			mu.Lock()
			busyAt = append(busyAt, time.Now())
			mu.Unlock()
			if try == 1 {
				return http.StatusTooManyRequests, http.Header{"Retry-After": {"1"}}
			}
		}
		return http.StatusCreated, nil
	})
	if err := w.svc.Issued(context.Background(), w.q, "ann", "tok-1", time.Now().Add(time.Minute)); err != nil {
		t.Fatal(err)
	}
	subs := w.subscriptions("ann")
	if _, ok := subs[goneID]; ok || len(subs) != 2 {
		t.Errorf("subscriptions after a 410: %d, gone one still there: %v; want the 2 others", len(subs), ok)
	}
	if _, ok := subs[brokenID]; !ok {
		t.Error("the device that answered 500 lost its subscription; a failing push service is not a gone device")
	}
	if n := w.server.Tries("gone"); n != 1 {
		t.Errorf("gone device asked %d times, want 1", n)
	}
	if n := w.server.Tries("broken"); n != 3 {
		t.Errorf("failing device asked %d times, want Attempts = 3", n)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(busyAt) != 2 || busyAt[1].Sub(busyAt[0]) < time.Second {
		t.Errorf("busy device asked at %v, want twice, a second or more apart (Retry-After: 1)", busyAt)
	}
	taken := 0
	for _, m := range w.server.Received() {
		if m.Device == "busy" && m.Err == nil {
			taken++
		}
	}
	if taken != 1 {
		t.Errorf("busy device took %d messages, want 1", taken)
	}
}

// TestOnlyPushServicesAreSentTo: a subscription whose endpoint is not a
// push service's https URL, or whose keys or words are bad, is refused
// with every bad field named, and nothing is stored. The client refuses
// to connect to an address that is not public, whatever the name.
func TestOnlyPushServicesAreSentTo(t *testing.T) {
	t.Parallel()
	w := newWorld(t, func(c *Config) {
		c.Endpoints = Endpoints{Hosts: []string{"fcm.googleapis.com", "*.push.services.mozilla.com"}}
	})
	d := pushtest.NewDevice()
	p256dh, auth := d.Keys()
	good := Request{Subscription: Subscription{Endpoint: "https://fcm.googleapis.com/fcm/send/abc", Keys: Keys{P256dh: p256dh, Auth: auth}}, Title: "Your turn", Lang: "en"}
	if _, err := w.svc.Subscribe(context.Background(), w.q, "ann", good); err != nil {
		t.Fatalf("a Chrome subscription was refused: %v", err)
	}
	mozilla := good
	mozilla.Subscription.Endpoint = "https://updates.push.services.mozilla.com/wpush/v2/gAAA"
	if _, err := w.svc.Subscribe(context.Background(), w.q, "ann", mozilla); err != nil {
		t.Fatalf("a Firefox subscription was refused: %v", err)
	}
	offCurve := "BA" + strings.Repeat("A", 85) // 0x04 and zeros: 65 bytes, not a point
	cases := []struct {
		name  string
		edit  func(*Request)
		field string
	}{
		{"plain http", func(r *Request) { r.Subscription.Endpoint = "http://fcm.googleapis.com/fcm/send/abc" }, "subscription.endpoint"},
		{"loopback", func(r *Request) { r.Subscription.Endpoint = "http://127.0.0.1:8080/push" }, "subscription.endpoint"},
		{"metadata service", func(r *Request) { r.Subscription.Endpoint = "https://169.254.169.254/latest/meta-data" }, "subscription.endpoint"},
		{"suffix trick", func(r *Request) { r.Subscription.Endpoint = "https://fcm.googleapis.com.evil.example/x" }, "subscription.endpoint"},
		{"prefix trick", func(r *Request) { r.Subscription.Endpoint = "https://evilpush.services.mozilla.com.example/x" }, "subscription.endpoint"},
		{"bare suffix", func(r *Request) { r.Subscription.Endpoint = "https://push.services.mozilla.com/x" }, "subscription.endpoint"},
		{"user info", func(r *Request) { r.Subscription.Endpoint = "https://u:p@fcm.googleapis.com/x" }, "subscription.endpoint"},
		{"other port", func(r *Request) { r.Subscription.Endpoint = "https://fcm.googleapis.com:8443/x" }, "subscription.endpoint"},
		{"huge", func(r *Request) {
			r.Subscription.Endpoint = "https://fcm.googleapis.com/" + strings.Repeat("a", MaxEndpointBytes)
		}, "subscription.endpoint"},
		{"key off the curve", func(r *Request) { r.Subscription.Keys.P256dh = offCurve }, "subscription.keys.p256dh"},
		{"short key", func(r *Request) { r.Subscription.Keys.P256dh = "BAAA" }, "subscription.keys.p256dh"},
		{"short auth", func(r *Request) { r.Subscription.Keys.Auth = "AAAA" }, "subscription.keys.auth"},
		{"no title", func(r *Request) { r.Title = "" }, "title"},
		{"long body", func(r *Request) { r.Body = strings.Repeat("é", MaxBodyRunes+1) }, "body"},
		{"control characters", func(r *Request) { r.Title = "Your\x1b[2Jturn" }, "title"},
		{"bad language", func(r *Request) { r.Lang = "en_US; drop" }, "lang"},
	}
	for _, c := range cases {
		r := good
		c.edit(&r)
		_, err := w.svc.Subscribe(context.Background(), w.q, "mallory", r)
		var bad *InvalidError
		if !errors.As(err, &bad) || len(bad.Fields) != 1 || bad.Fields[0].Field != c.field {
			t.Errorf("%s: %v, want one bad field %s", c.name, err, c.field)
		}
	}
	if n := len(w.subscriptions("mallory")); n != 0 {
		t.Errorf("%d refused subscriptions were stored", n)
	}
	if n := len(w.subscriptions("ann")); n != 2 {
		t.Errorf("ann has %d subscriptions, want 2", n)
	}
	if _, err := w.svc.Subscribe(context.Background(), "bad{id}", "ann", good); !errors.Is(err, ErrInvalidQueue) {
		t.Errorf("subscribe in a malformed queue id: %v", err)
	}
	if _, err := w.svc.Subscribe(context.Background(), testenv.ID(t)+"-none", "ann", good); !errors.Is(err, queue.ErrNotFound) {
		t.Errorf("subscribe in a queue that does not exist: %v", err)
	}

	// The dialer: a name that resolves inward is not reached.
	inside := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { t.Error("an inward address was reached") }))
	defer inside.Close()
	for _, u := range []string{inside.URL, strings.Replace(inside.URL, "127.0.0.1", "localhost", 1)} {
		res, err := newClient(false).Post(u, "application/octet-stream", nil)
		if err == nil {
			res.Body.Close()
		}
		if !errors.Is(err, errPrivate) {
			t.Errorf("POST %s from the push client: %v, want %v", u, err, errPrivate)
		}
	}
}

// TestAUserKeepsAFewDevices: a fourth device evicts the oldest; saving the
// same browser again replaces it (one id per endpoint); removing a device
// is answered once, then ErrNoSubscription.
func TestAUserKeepsAFewDevices(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	var ids []string
	for i := range 4 {
		_, id := w.subscribe("ann", fmt.Sprintf("d%d", i))
		ids = append(ids, id)
		time.Sleep(2 * time.Millisecond) // distinct saved-at milliseconds
	}
	subs := w.subscriptions("ann")
	if _, ok := subs[ids[0]]; len(subs) != 3 || ok {
		t.Fatalf("after 4 devices: %d kept, the oldest still there: %v; want 3 without it", len(subs), ok)
	}
	d := pushtest.NewDevice()
	p256dh, auth := d.Keys()
	again, err := w.svc.Subscribe(context.Background(), w.q, "ann", Request{Subscription: Subscription{
		Endpoint: w.server.Endpoint("d3", d), Keys: Keys{P256dh: p256dh, Auth: auth}}, Title: "Again"})
	if err != nil || again != ids[3] || len(w.subscriptions("ann")) != 3 {
		t.Fatalf("the same endpoint again: id %q (first %q), err %v, %d kept; want the same id, 3 kept", again, ids[3], err, len(w.subscriptions("ann")))
	}
	if err := w.svc.Unsubscribe(context.Background(), w.q, "ann", ids[3]); err != nil {
		t.Fatal(err)
	}
	if err := w.svc.Unsubscribe(context.Background(), w.q, "ann", ids[3]); !errors.Is(err, ErrNoSubscription) {
		t.Errorf("second unsubscribe: %v, want ErrNoSubscription", err)
	}
	if err := w.svc.Unsubscribe(context.Background(), w.q, "bob", ids[2]); !errors.Is(err, ErrNoSubscription) {
		t.Errorf("bob removing ann's device: %v, want ErrNoSubscription", err)
	}
	if n := len(w.subscriptions("ann")); n != 2 {
		t.Errorf("ann has %d devices, want 2", n)
	}
}

// TestATurnPastItsEntryIsNotPushed: an event that arrives after its token
// expired pushes nothing, and a push service that makes the sender wait
// past the expiry is not asked again after it.
func TestATurnPastItsEntryIsNotPushed(t *testing.T) {
	t.Parallel()
	w := newWorld(t, func(c *Config) { c.Attempts = 10 })
	w.subscribe("ann", "phone")
	if err := w.svc.Issued(context.Background(), w.q, "ann", "tok-old", time.Now().Add(-time.Second)); err != nil {
		t.Fatal(err)
	}
	if n := w.server.Tries("phone"); n != 0 {
		t.Fatalf("an expired turn reached the device %d times", n)
	}
	w.server.Answer(func(string, int) (int, http.Header) {
		return http.StatusTooManyRequests, http.Header{"Retry-After": {"30"}}
	})
	start := time.Now()
	if err := w.svc.Issued(context.Background(), w.q, "ann", "tok-new", time.Now().Add(2*time.Second)); err != nil {
		t.Fatal(err)
	}
	if n, took := w.server.Tries("phone"), time.Since(start); n != 1 || took > 10*time.Second {
		t.Errorf("asked %d times in %v; want once, then given up when the 2 s entry ended", n, took)
	}
}

// TestPushWhileRedisIsDown: with Redis cut off, a subscribe fails with
// queue.ErrUnavailable and an Issued returns an error (the event is tried
// again), sending nothing; once Redis is back the same event pushes once.
func TestPushWhileRedisIsDown(t *testing.T) {
	t.Parallel()
	store, proxy := testenv.ProxiedStore(t)
	w := newWorldOn(t, store)
	w.subscribe("ann", "phone")
	proxy.Cut()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	d := pushtest.NewDevice()
	p256dh, auth := d.Keys()
	_, err := w.svc.Subscribe(ctx, w.q, "bob", Request{Subscription: Subscription{Endpoint: w.server.Endpoint("bob", d),
		Keys: Keys{P256dh: p256dh, Auth: auth}}, Title: "Your turn"})
	if !errors.Is(err, queue.ErrUnavailable) {
		t.Errorf("subscribe with Redis cut off: %v, want queue.ErrUnavailable", err)
	}
	expires := time.Now().Add(time.Minute)
	if err := w.svc.Issued(ctx, w.q, "ann", "tok-1", expires); err == nil {
		t.Error("Issued with Redis cut off returned nil: the event would be acknowledged unsent")
	}
	if n := w.server.Tries("phone"); n != 0 {
		t.Errorf("%d pushes went out without Redis", n)
	}
	proxy.Restore()
	deadline := time.Now().Add(10 * time.Second)
	for {
		err := w.svc.Issued(context.Background(), w.q, "ann", "tok-1", expires)
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("Issued still failing 10 s after Redis came back: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if err := w.svc.Issued(context.Background(), w.q, "ann", "tok-1", expires); err != nil {
		t.Fatal(err)
	}
	if n := len(w.server.Received()); n != 1 {
		t.Errorf("%d messages after Redis came back, want 1", n)
	}
}

// TestTheConfigIsChecked: a key pair that is not one, or a subject that is
// not a contact URL, is refused at start.
func TestTheConfigIsChecked(t *testing.T) {
	t.Parallel()
	private, public, _ := webpush.GenerateVAPIDKeys()
	other, _, _ := webpush.GenerateVAPIDKeys()
	for _, c := range []struct {
		public, private, subject string
		ok                       bool
	}{
		{public, private, "mailto:ops@shop.example", true},
		{public, private, "https://shop.example/contact", true},
		{public, other, "mailto:ops@shop.example", false},
		{public, "not-a-key", "mailto:ops@shop.example", false},
		{"", private, "mailto:ops@shop.example", false},
		{public, private, "ops@shop.example", false},
		{public, private, "http://shop.example", false},
	} {
		err := errors.Join(CheckKeys(c.public, c.private), CheckSubject(c.subject))
		if (err == nil) != c.ok {
			t.Errorf("public %.8s… private %.8s… subject %q: %v, want ok=%v", c.public, c.private, c.subject, err, c.ok)
		}
	}
}

// TestASlowPushServiceIsAskedAgainSafely: a push service that answers
// later than the client waits (it took the message, the answer came too
// late) is asked again; the device then holds two messages of the same
// Topic, which the push service collapses and the worker shows under one
// tag: one notification.
func TestASlowPushServiceIsAskedAgainSafely(t *testing.T) {
	t.Parallel()
	client := newClient(true)
	client.Timeout = 300 * time.Millisecond
	w := newWorld(t, func(c *Config) { c.Client = client })
	w.subscribe("ann", "phone")
	var once sync.Once
	w.server.Answer(func(_ string, try int) (int, http.Header) {
		if try == 1 {
			once.Do(func() { time.Sleep(time.Second) })
		}
		return http.StatusCreated, nil
	})
	if err := w.svc.Issued(context.Background(), w.q, "ann", "tok-1", time.Now().Add(time.Minute)); err != nil {
		t.Fatal(err)
	}
	time.Sleep(time.Second) // the late answer's message lands
	got := w.server.Received()
	if n := w.server.Tries("phone"); n != 2 || len(got) != 2 {
		t.Fatalf("asked %d times, %d messages taken; want 2 and 2 (the late one and the retry)", n, len(got))
	}
	if got[0].Topic != got[1].Topic || string(got[0].Plain) != string(got[1].Plain) {
		t.Errorf("the retry differs: topics %q %q, messages %q %q; want the same, so the device shows one", got[0].Topic, got[1].Topic, got[0].Plain, got[1].Plain)
	}
}

// TestPushesArePacedPerPushService: at 20 a second with a burst of 1, the
// last of ten people's pushes to one push service arrives at least 450 ms
// after they were all asked for (a lower bound, which a busy machine only
// lengthens); another push service is not held back by it.
func TestPushesArePacedPerPushService(t *testing.T) {
	t.Parallel()
	w := newWorld(t, func(c *Config) { c.Rate, c.Burst = 20, 1 })
	other := pushtest.NewServer(t, w.svc.cfg.PublicKey)
	for i := range 10 {
		w.subscribe(fmt.Sprintf("u%d", i), fmt.Sprintf("d%d", i))
	}
	d := pushtest.NewDevice()
	p256dh, auth := d.Keys()
	if _, err := w.svc.Subscribe(context.Background(), w.q, "elsewhere", Request{Subscription: Subscription{
		Endpoint: other.Endpoint("e", d), Keys: Keys{P256dh: p256dh, Auth: auth}}, Title: "Your turn"}); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	errs := make([]error, 11)
	var wg sync.WaitGroup
	for i := range 10 {
		wg.Go(func() {
			errs[i] = w.svc.Issued(context.Background(), w.q, fmt.Sprintf("u%d", i), fmt.Sprintf("t%d", i), time.Now().Add(time.Minute))
		})
	}
	wg.Go(func() {
		errs[10] = w.svc.Issued(context.Background(), w.q, "elsewhere", "te", time.Now().Add(time.Minute))
	})
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("push %d: %v", i, err)
		}
	}
	got := w.server.Received()
	if len(got) != 10 {
		t.Fatalf("%d pushes to the paced service, want 10", len(got))
	}
	last := got[0].At
	for _, m := range got {
		last = maxTime(last, m.At)
	}
	if took := last.Sub(start); took < 450*time.Millisecond {
		t.Errorf("10 pushes at 20/s all arrived within %v, want the last at least 450 ms after the start", took)
	}
	o := other.Received()
	if len(o) != 1 {
		t.Fatalf("the other push service: %d messages, want 1", len(o))
	}
	if o[0].At.After(last) {
		t.Errorf("the other push service's message came %v after the start, after the paced one's last (%v): held behind it", o[0].At.Sub(start), last.Sub(start))
	}
}

func maxTime(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}
