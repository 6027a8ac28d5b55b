package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/browser"
	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/cdproto/serviceworker"
	"github.com/chromedp/chromedp"

	"github.com/waitingroom/waitingroom/pkg/testenv"
	"github.com/waitingroom/waitingroom/pkg/testenv/pushtest"
)

// pushHooks, run before the page's own script, stand in for the browser's
// push service, which headless Chromium cannot reach (its subscribe needs
// Google's FCM over the internet): PushManager's subscribe answers a
// subscription whose endpoint is the test's push service on loopback,
// with a device's keys, and records what the page asked for. The rest is
// the browser's own: the permission, the service worker, and the push
// event the test delivers to the worker over CDP.
const pushHooks = `(() => {
  window.__subscribed = [];
  let sub = null;
  PushManager.prototype.getSubscription = async function () { return sub; };
  PushManager.prototype.subscribe = async function (opts) {
    const key = btoa(String.fromCharCode(...new Uint8Array(opts.applicationServerKey)))
      .replace(/\+/g, '-').replace(/\//g, '_').replace(/=+$/, '');
    window.__subscribed.push({ userVisibleOnly: opts.userVisibleOnly, key });
    const json = { endpoint: %q, expirationTime: null, keys: { p256dh: %q, auth: %q } };
    sub = { endpoint: json.endpoint, toJSON: () => json, unsubscribe: async () => true };
    return sub;
  };
})()`

// pushRecord is a stored subscription's words.
type pushRecord struct {
	Subscription struct {
		Endpoint string `json:"endpoint"`
	} `json:"subscription"`
	Title, Body, Lang string
}

// browserPush: a person waiting ticks "also when this page is closed".
// The browser is asked for notifications, the service worker registers,
// the page subscribes with the service's VAPID key and hands the
// subscription to the notification-service with the turn's words in its
// language; unticking forgets it there, ticking again keeps it again. The
// person closes the page. At their turn the notification-service pushes
// once to the push service, encrypted for the device and VAPID-signed
// (pushtest decrypts and checks it); that message, delivered to the
// service worker, shows one notification with the page's words, tagged
// as the page's own, that opens the queue's page.
func browserPush(t *testing.T, s *browserSystem, b context.Context, q string) {
	s.queue(q, map[string]any{"state": "PAUSED", "admissionRatePerSec": 5, "activationSpreadMs": 0})
	s.product(q, "bell", "Bell", 5, 900)
	const user = "shopper-push"
	device := pushtest.NewDevice()
	p256dh, authKey := device.Keys()
	endpoint := s.pushes.Endpoint(user, device)
	store := testenv.StoreAt(t, testenv.RedisURL(t))
	stored := func() []pushRecord {
		m, err := store.PushSubscriptions(context.Background(), q, user)
		if err != nil {
			t.Fatal(err)
		}
		var out []pushRecord
		for _, v := range m {
			var r pushRecord
			if err := json.Unmarshal(v, &r); err != nil {
				t.Fatal(err)
			}
			out = append(out, r)
		}
		return out
	}

	tb := newTab(t, b, "push")
	ctx, cancel := context.WithTimeout(tb.ctx, 90*time.Second)
	defer cancel()
	if _, err := chromedp.Call(ctx, page.AddScriptToEvaluateOnNewDocument, page.AddScriptToEvaluateOnNewDocumentParams{
		Source: fmt.Sprintf(pushHooks, endpoint, p256dh, authKey)}); err != nil {
		t.Fatalf("add the hooks: %v", err)
	}
	// The person's yes to notifications, as the browser keeps it for the
	// origin (headless Chromium has no prompt to click).
	if _, err := chromedp.CallBrowser(ctx, browser.SetPermission, browser.SetPermissionParams{
		Permission: &browser.PermissionDescriptor{Name: "notifications"}, Setting: browser.PermissionSettingGranted,
		Origin: s.gateway.URL, BrowserContextID: chromedp.FromContext(tb.ctx).BrowserContextID,
	}); err != nil {
		t.Fatalf("grant notifications: %v", err)
	}
	registrations := make(chan serviceworker.RegistrationID, 8)
	events := chromedp.Events(tb.ctx, serviceworker.WorkerRegistrationUpdated)
	go func() {
		for ev, err := range events {
			if err != nil {
				return
			}
			for _, r := range ev.Registrations {
				if strings.HasSuffix(r.ScopeURL, "/static/") && !r.IsDeleted {
					select {
					case registrations <- r.RegistrationID:
					default:
					}
				}
			}
		}
	}()
	if _, err := chromedp.Call(ctx, serviceworker.Enable, struct{}{}); err != nil {
		t.Fatalf("enable the service worker domain: %v", err)
	}

	tb.navigate(s.gateway.URL + "/q/" + q)
	tb.signIn(user)
	tb.click("enter")
	tb.waitFor("place 1", 10*time.Second, func(p pageState) bool { return p.Shown["figures"] && p.Position == "1" })
	// offered says whether the choice is shown and ticked, once the page
	// is done with a click on it (the box is disabled meanwhile).
	offered := func() (shown, checked bool) {
		if eval[bool](tb, `document.getElementById('alert-push').disabled`) {
			return false, false
		}
		return eval[bool](tb, `document.getElementById('alert-push-row').checkVisibility()`), eval[bool](tb, `document.getElementById('alert-push').checked`)
	}
	waitOffered := func(what string, checked bool) {
		t.Helper()
		deadline := time.Now().Add(5 * time.Second)
		for {
			sh, ch := offered()
			if sh && ch == checked {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: push offered %v, ticked %v; want offered, ticked %v", what, sh, ch, checked)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	waitOffered("waiting", false)
	tb.audit("push-offered")

	tb.click("alert-push")
	waitOffered("ticked", true)
	if note := eval[string](tb, `document.getElementById('alert-push-note').textContent`); note != "This device will be notified even if you close the page." {
		t.Fatalf("ticked: the note says %q", note)
	}
	var subscribed []struct {
		UserVisibleOnly bool   `json:"userVisibleOnly"`
		Key             string `json:"key"`
	}
	if err := json.Unmarshal(eval[[]byte](tb, `window.__subscribed`), &subscribed); err != nil {
		t.Fatal(err)
	}
	if len(subscribed) != 1 || !subscribed[0].UserVisibleOnly || subscribed[0].Key != s.vapid {
		t.Fatalf("the page subscribed %+v, want once, userVisibleOnly, with the service's VAPID key", subscribed)
	}
	worker := ""
	for deadline := time.Now().Add(5 * time.Second); !strings.HasSuffix(worker, "/static/sw.js") && time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		worker, _ = chromedp.Run(ctx, chromedp.Evaluate[string](`navigator.serviceWorker.getRegistration('/static/').then((r) => (r && r.active ? r.active.scriptURL : ''))`, chromedp.EvalAwaitPromise))
	}
	if !strings.HasSuffix(worker, "/static/sw.js") {
		t.Fatalf("the service worker: %q, want /static/sw.js active", worker)
	}
	if got := stored(); len(got) != 1 || got[0].Subscription.Endpoint != endpoint || got[0].Title != "It is your turn" ||
		got[0].Body != "It is your turn! Order before your pass expires." || got[0].Lang != "en" {
		t.Fatalf("the notification-service keeps %+v, want the one subscription with the English words", got)
	}

	tb.do(chromedp.Reload())
	tb.waitFor("place 1 again", 10*time.Second, func(p pageState) bool { return p.Shown["figures"] && p.Position == "1" })
	waitOffered("reloaded", true)
	tb.click("alert-push")
	waitOffered("unticked", false)
	within(5*time.Second, func() bool { return len(stored()) == 0 })
	if n := len(stored()); n != 0 || eval[bool](tb, `Boolean(localStorage['push:`+q+`'])`) {
		t.Fatalf("unticked: %d subscriptions kept, id still in the page's storage: %v", n, eval[bool](tb, `Boolean(localStorage['push:`+q+`'])`))
	}
	tb.click("alert-push")
	waitOffered("ticked again", true)
	if n := len(stored()); n != 1 {
		t.Fatalf("ticked again: %d subscriptions, want 1", n)
	}

	// The person closes the page (the tab shows another document of the
	// origin, so the test can look at the worker's notifications).
	tb.navigate(s.gateway.URL + "/config.json")
	s.queue(q, map[string]any{"state": "OPEN"})
	within(20*time.Second, func() bool { return len(s.pushes.Received()) > 0 })
	time.Sleep(500 * time.Millisecond) // a second push would come now
	got := s.pushes.Received()
	if len(got) != 1 || got[0].Err != nil || got[0].Device != user {
		t.Fatalf("pushes at the turn: %+v, want one for the device, decrypted and signed", got)
	}
	var turn struct {
		QueueID   string `json:"queueId"`
		Title     string `json:"title"`
		Body      string `json:"body"`
		Lang      string `json:"lang"`
		ExpiresAt int64  `json:"expiresAt"`
	}
	if err := json.Unmarshal(got[0].Plain, &turn); err != nil || turn.QueueID != q || turn.Title != "It is your turn" ||
		turn.Lang != "en" || turn.ExpiresAt <= time.Now().UnixMilli() {
		t.Fatalf("the push decrypted: %s (%v)", got[0].Plain, err)
	}

	var reg serviceworker.RegistrationID
	select {
	case reg = <-registrations:
	case <-time.After(5 * time.Second):
		t.Fatal("no service worker registration reported over CDP")
	}
	// The worker is woken for the push; on a busy machine that may take a
	// while, so the same message is delivered again (at most five times, 3 s
	// apart) until it shows: under one tag, every delivery is the same one
	// notification.
	type shown struct {
		Title, Body, Tag, Lang, Path string
	}
	var notes []shown
	deliveries := 0
	for ; deliveries < 5 && len(notes) == 0; deliveries++ {
		dctx, dcancel := context.WithTimeout(tb.ctx, 10*time.Second)
		_, err := chromedp.Call(dctx, serviceworker.DeliverPushMessage, serviceworker.DeliverPushMessageParams{
			Origin: s.gateway.URL, RegistrationID: reg, Data: string(got[0].Plain)})
		dcancel()
		if err != nil {
			t.Fatalf("deliver the push to the worker: %v", err)
		}
		for deadline := time.Now().Add(3 * time.Second); len(notes) == 0 && time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
			rctx, rcancel := context.WithTimeout(tb.ctx, 5*time.Second)
			raw, err := chromedp.Run(rctx, chromedp.Evaluate[[]byte](`navigator.serviceWorker.getRegistration('/static/')
			  .then((r) => r.getNotifications())
			  .then((ns) => ns.map((n) => ({ title: n.title, body: n.body, tag: n.tag, lang: n.lang, path: n.data && n.data.path })))`, chromedp.EvalAwaitPromise))
			rcancel()
			if err != nil {
				t.Fatalf("read the worker's notifications: %v", err)
			}
			if err := json.Unmarshal(raw, &notes); err != nil {
				t.Fatal(err)
			}
		}
	}
	want := shown{Title: "It is your turn", Body: "It is your turn! Order before your pass expires.", Tag: "turn:" + q, Lang: "en", Path: "/q/" + q}
	if len(notes) != 1 || notes[0] != want {
		t.Fatalf("the worker shows %+v, want one: %+v", notes, want)
	}
	t.Logf("push: subscribed with the VAPID key, 1 push at the turn (%d bytes, TTL %d s), decrypted; the worker shows it as the page's own notification (delivered to it %d times)",
		got[0].Size, got[0].TTL, deliveries)
}

// within polls done every 50 ms until it holds or d passed; the caller
// checks what it waited for.
func within(d time.Duration, done func() bool) {
	for deadline := time.Now().Add(d); !done() && time.Now().Before(deadline); {
		time.Sleep(50 * time.Millisecond)
	}
}
