package e2e

import (
	"context"
	"flag"
	"fmt"
	"math"
	"net/http"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/waitingroom/waitingroom/pkg/auth"
	"github.com/waitingroom/waitingroom/pkg/queue"
	"github.com/waitingroom/waitingroom/pkg/testenv"
)

// TestBrowserWaitingRoom drives the waiting-room page in headless chromium
// against the services as processes: a buyer waits, watches the line move,
// gets the turn and orders; a full line; a turn that expires; the page
// without its notification stream, polling; a sale with a start time,
// whose early comers get drawn places; and a sale that fails OPEN, whose
// buyers go straight to the order form while Redis is down.
func TestBrowserWaitingRoom(t *testing.T) {
	t.Parallel()
	began := time.Now()
	browser := newBrowser(t)
	id := testenv.ID(t)
	qs := browserQueues{happy: id + "-happy", full: id + "-full", expired: id + "-expired", polling: id + "-polling", drop: id + "-drop", ends: id + "-ends", keys: id + "-keys", other: id + "-other", push: id + "-push"}
	// Two more queues, which no dispatcher serves: nobody is admitted there.
	link, challenge, refused, langs, shots := id+"-link", id+"-challenge", id+"-refused", id+"-lang", id+"-shots"
	testenv.PurgeAtCleanup(t, testenv.RedisURL(t), link, challenge, refused, langs, shots)
	sys := newBrowserSystem(t, qs)
	t.Cleanup(func() {
		for _, q := range []string{qs.happy, qs.full, qs.expired, qs.polling, qs.drop, qs.ends, qs.keys, qs.other, qs.push, link, challenge, refused, langs, shots} {
			sys.call(http.MethodDelete, sys.gateway.URL+"/admin/v1/queues/"+q, "ops", auth.RoleAdmin, nil)
		}
	})
	t.Logf("services and browser up in %s", time.Since(began).Round(time.Millisecond))

	t.Run("AuditCanFail", func(t *testing.T) { browserAuditCanFail(t, browser) })
	t.Run("HappyPath", func(t *testing.T) { browserHappyPath(t, sys.in(t), browser, qs.happy) })
	t.Run("QueueFull", func(t *testing.T) { browserQueueFull(t, sys.in(t), browser, qs.full) })
	t.Run("Expired", func(t *testing.T) { browserExpired(t, sys.in(t), browser, qs.expired) })
	t.Run("PollingFallback", func(t *testing.T) { browserPollingFallback(t, sys.in(t), browser, qs.polling) })
	t.Run("LinkIdentity", func(t *testing.T) { browserLinkIdentity(t, sys.in(t), browser, link) })
	t.Run("EnterChallenge", func(t *testing.T) { browserEnterChallenge(t, sys.in(t), browser, challenge) })
	t.Run("ChallengeRefused", func(t *testing.T) { browserChallengeRefused(t, sys.in(t), browser, refused) })
	t.Run("ScheduledDrop", func(t *testing.T) { browserScheduledDrop(t, sys.in(t), browser, qs.drop) })
	t.Run("Languages", func(t *testing.T) { browserLanguages(t, sys.in(t), browser, langs) })
	t.Run("Ends", func(t *testing.T) { browserEnds(t, sys.in(t), browser, qs.ends, id+"-end") })
	t.Run("Keyboard", func(t *testing.T) { browserKeyboard(t, sys.in(t), browser, qs.keys) })
	t.Run("Elsewhere", func(t *testing.T) { browserElsewhere(t, sys.in(t), browser, qs.other) })
	t.Run("Push", func(t *testing.T) { browserPush(t, sys.in(t), browser, qs.push) })
	t.Run("Screenshots", func(t *testing.T) { browserScreenshots(t, sys.in(t), browser, shots) })
	// On a system of its own, whose private Redis it stops.
	t.Run("Bypass", func(t *testing.T) { browserBypass(t, browser, id+"-bypass") })
	// Every state the page has was audited, unless -run picked subtests.
	if !strings.Contains(flag.Lookup("test.run").Value.String(), "/") {
		checkAudited(t)
	}
	t.Logf("browser test took %s", time.Since(began).Round(time.Millisecond))
}

// in is the system as seen from subtest t (fatal errors go to t).
func (s *browserSystem) in(t *testing.T) *browserSystem {
	c := *s
	c.t = t
	return &c
}

// positionTrail records the places the page showed, in order, without repeats.
type positionTrail []string

func (p *positionTrail) add(st pageState) {
	if st.Shown["figures"] && st.Position != "" && (len(*p) == 0 || (*p)[len(*p)-1] != st.Position) {
		*p = append(*p, st.Position)
	}
}

func atoi(s string) int {
	n, err := strconv.Atoi(s)
	if err != nil {
		return -1
	}
	return n
}

// Four people already wait when the buyer enters at place 5; the line moves
// at 2 a second; the buyer's activation is spread 3 s after the turn comes
// (countdown); the buyer orders two tees and the order exists.
func browserHappyPath(t *testing.T, s *browserSystem, browser context.Context, q string) {
	s.queue(q, map[string]any{"state": "PAUSED", "admissionRatePerSec": 2, "activationSpreadMs": 0})
	s.product(q, "tee", "Limited tee", 5, 2500)
	ahead := []string{"ann", "ben", "cat", "dov"}
	for i, u := range ahead {
		if p := s.enter(q, u); p != i+1 {
			t.Fatalf("%s entered at %d, want %d", u, p, i+1)
		}
	}
	const buyer = "shopper-happy"
	tb := openTab(t, browser, "happy", s.gateway.URL+"/q/"+q)
	tb.signIn(buyer)
	tb.shot("signed-in")
	reqs := tb.recordRequests()
	tb.recordSaid()
	tb.click("enter")

	st := tb.waitFor("place 5 in a paused line", 10*time.Second, func(p pageState) bool {
		return p.Shown["figures"] && p.Position == "5"
	})
	if st.Ahead != "4" || st.ETA != "about 1–4 sec" || st.Progress != 0 || !strings.Contains(st.QueueState, "paused") ||
		!strings.HasPrefix(st.Status, "Paused: the line is not moving right now") || st.Kind != "warn" {
		t.Fatalf("at place 5 of a paused line the page shows: %v", st)
	}
	tb.shot("place-5-paused")
	tb.audit("waiting-paused")

	var trail positionTrail
	trail.add(st)
	moved := time.Now()
	s.queue(q, map[string]any{"state": "OPEN"})
	st = tb.waitFor("a place of 3 or better", 15*time.Second, func(p pageState) bool {
		trail.add(p)
		return p.Shown["turn"] || (p.Shown["figures"] && atoi(p.Position) >= 1 && atoi(p.Position) <= 3)
	})
	if st.Shown["turn"] {
		t.Fatalf("the turn came before the page showed a place of 3 or better; places shown %v", trail)
	}
	// Hold the line here, for the countdown below.
	s.queue(q, map[string]any{"state": "PAUSED"})
	place := atoi(st.Position)
	if want := int(100 - 100*float64(place)/5 + 0.5); st.Progress != want || !strings.Contains(st.Status, fmt.Sprintf("You are number %d in line", place)) {
		t.Fatalf("at place %d: progress %d%% (want %d%%), status %q", place, st.Progress, want, st.Status)
	}
	t.Logf("the page showed place %d %s after the line started moving; places so far %v", place, time.Since(moved).Round(time.Millisecond), trail)
	// The page keeps the ticket enter gave and sends it back: every poll
	// (X-Queue-Ticket) and the stream (?ticket=).
	polls := reqs.matching(func(r sentRequest) bool {
		return strings.HasSuffix(r.url, "/queues/"+q+"/position") && r.method == http.MethodGet
	})
	streams := reqs.matching(func(r sentRequest) bool { return strings.Contains(r.url, "/queues/"+q+"/events?") })
	ticketed := 0
	for _, r := range polls {
		if r.headers["x-queue-ticket"] != "" {
			ticketed++
		}
	}
	if len(polls) == 0 || ticketed != len(polls) || len(streams) == 0 || !strings.Contains(streams[0].url, "&ticket=") {
		t.Fatalf("of %d polls %d carried a ticket; %d streams, the first %v", len(polls), ticketed, len(streams), streams)
	}
	t.Logf("tickets: %d of %d polls carried X-Queue-Ticket, %d streams opened with ?ticket=", ticketed, len(polls), len(streams))
	tb.shot(fmt.Sprintf("place-%d", place))

	// The countdown needs an activation time in the future: leave exactly one
	// person ahead of the buyer, so that one tick admits both and spreads the
	// buyer's activation 3 s after the other's (6000 ms x 1/2).
	countdown := false
	if me := s.position(q, buyer); me["state"] == "WAITING" {
		var waiting []string
		for _, u := range ahead {
			if s.position(q, u)["state"] == "WAITING" {
				waiting = append(waiting, u)
			}
		}
		for _, u := range waiting[:max(0, len(waiting)-1)] {
			if st, v := s.call(http.MethodDelete, s.gateway.URL+"/api/v1/queues/"+q+"/position", u, "", nil); st != http.StatusNoContent {
				t.Fatalf("%s leaves: %d %v", u, st, v)
			}
		}
		countdown = len(waiting) > 0
		if !countdown {
			t.Logf("nobody is left ahead of the buyer (the page lagged): no countdown to check")
		}
	}
	s.queue(q, map[string]any{"state": "OPEN", "admissionRatePerSec": 50, "activationSpreadMs": 6000})
	st = tb.waitFor("the turn", 15*time.Second, func(p pageState) bool { trail.add(p); return p.Shown["turn"] })
	turnAt := time.Now()
	if !strings.HasPrefix(st.Status, "It is your turn") || st.Kind != "ok" {
		t.Fatalf("the turn: status %q (%s)", st.Status, st.Kind)
	}
	t.Logf("places shown before the turn: %v; the turn came %s after the line first moved", trail, turnAt.Sub(moved).Round(time.Millisecond))
	calmAnnouncements(t, tb, st.Status)
	if countdown {
		st = tb.waitFor("the countdown to the turn", 5*time.Second, func(p pageState) bool { return p.Shown["countdown"] || p.Shown["order-form"] })
		if !st.Shown["countdown"] || !regexp.MustCompile(`^Your turn starts in [123] sec$`).MatchString(st.Countdown) {
			t.Fatalf("no countdown to the turn: %v", st)
		}
		t.Logf("countdown shown: %q", st.Countdown)
		tb.shot("countdown")
	}

	st = tb.waitFor("the order form", 10*time.Second, func(p pageState) bool {
		return p.Shown["order-form"] && len(p.Products) > 0 && len(p.Quantities) > 0 && !p.OrderDisabled
	})
	if countdown && time.Since(turnAt) < 2*time.Second {
		t.Fatalf("the order form came %s after the turn; the activation was 3 s later", time.Since(turnAt))
	}
	if want := "Limited tee — $25.00 — 5 left"; len(st.Products) != 1 || st.Products[0] != want {
		t.Fatalf("products %q, want [%q]", st.Products, want)
	}
	if strings.Join(st.Quantities, ",") != "1,2,3,4,5" {
		t.Fatalf("quantities %v, want 1..5 (stock 5)", st.Quantities)
	}
	if !regexp.MustCompile(`^◷ Your pass expires in (5 min|4 min, [45][0-9] sec)\.$`).MatchString(st.Expiry) {
		t.Fatalf("expiry countdown %q, want about 5 min", st.Expiry)
	}
	tb.shot("order-form")
	tb.audit("order-form")

	tb.do(chromedp.SetValue(chromedp.ID("quantity"), "2"))
	tb.click("order")
	st = tb.waitFor("the order confirmation", 15*time.Second, func(p pageState) bool { return p.Shown["result"] && p.OrderID != "" })
	if !strings.HasPrefix(st.Status, "Order confirmed. Your order number is "+st.OrderID) || st.Kind != "ok" || st.Shown["order-form"] {
		t.Fatalf("after ordering: %v", st)
	}
	tb.shot("confirmed")
	tb.audit("confirmed")
	code, order := s.call(http.MethodGet, s.order.URL+"/api/v1/orders/"+st.OrderID, buyer, "", nil)
	if code != http.StatusOK || order["quantity"] != 2.0 || order["productId"] != "tee" || order["queueId"] != q || order["status"] != "CREATED" {
		t.Fatalf("GET order %s as %s: %d %v", st.OrderID, buyer, code, order)
	}
	if p := s.position(q, buyer); p["state"] != "ORDERED" {
		t.Fatalf("after the order the buyer stands %v", p["state"])
	}
	t.Logf("order %s confirmed %s after the turn", st.OrderID, time.Since(turnAt).Round(time.Millisecond))

	// A reload keeps the sign-in and tells where the buyer stands.
	tb.do(chromedp.Reload())
	st = tb.waitFor("the already-ordered message", 10*time.Second, func(p pageState) bool { return strings.HasPrefix(p.Status, "You already ordered") })
	if st.Shown["enter"] || st.Shown["turn"] || st.Shown["identity"] {
		t.Fatalf("reloaded after ordering: %v", st)
	}
	tb.shot("reloaded")
	tb.audit("already-ordered")
}

// A line of one that holds one person: entering says it is full and when to
// try again. The buyer comes signed in by the shop (#token=), on the page's
// address with ?queue=, and confirms the sign-in the link offers.
func browserQueueFull(t *testing.T, s *browserSystem, browser context.Context, q string) {
	s.queue(q, map[string]any{"maxQueueSize": 1})
	s.enter(q, "first")
	jwt, err := s.ver.Mint("shopper-full", "", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	tb := openTab(t, browser, "full", s.gateway.URL+"/?queue="+q+"#token="+jwt)
	st := tb.waitFor("the sign-in question", 10*time.Second, func(p pageState) bool { return p.Shown["switch"] })
	if st.LinkUser != "shopper-full" || st.Shown["current-note"] || st.UseLink != "Continue as shopper-full" || st.KeepIdentity != "Ignore the link" {
		t.Fatalf("the link's sign-in, nobody signed in yet: %v (buttons %q / %q)", st, st.UseLink, st.KeepIdentity)
	}
	// Gone from the address bar at once; stored only when confirmed.
	tb.do(chromedp.Evaluate[chromedp.Void](`if (location.hash !== '' || localStorage.token !== undefined) throw new Error('hash ' + location.hash)`))
	tb.shot("sign-in-question")
	tb.audit("link-question")
	tb.click("use-link")
	st = tb.waitFor("the Enter button", 10*time.Second, func(p pageState) bool { return p.Shown["enter"] && !p.EnterDisabled })
	if st.Shown["identity"] || st.Shown["switch"] || st.Status != "You are not in line yet." {
		t.Fatalf("signed in by the shop: %v", st)
	}
	tb.do(chromedp.Evaluate[chromedp.Void](`if (localStorage.token === undefined) throw new Error('not stored')`))
	tb.shot("signed-in-by-the-shop")
	tb.click("enter")
	st = tb.waitFor("the line-full message", 10*time.Second, func(p pageState) bool { return strings.Contains(p.Status, "full") })
	m := regexp.MustCompile(`^The line is full, try again in (\d+) sec\.$`).FindStringSubmatch(st.Status)
	if m == nil || atoi(m[1]) < 9 || atoi(m[1]) > 11 || st.Kind != "warn" {
		t.Fatalf("line full: status %q (%s), want a retry in 9 to 11 s (10 s ±10 %%)", st.Status, st.Kind)
	}
	if !st.Shown["enter"] || !st.EnterDisabled || st.Shown["figures"] {
		t.Fatalf("line full: the Enter button should wait out the hint: %v", st)
	}
	t.Logf("line full: %q", st.Status)
	tb.shot("queue-full")
	tb.audit("line-full")
}

// A 2 s pass that is not used expires; Enter again puts the buyer back in line.
func browserExpired(t *testing.T, s *browserSystem, browser context.Context, q string) {
	s.queue(q, map[string]any{"admissionRatePerSec": 5, "tokenTtlSeconds": 2, "activationSpreadMs": 0})
	s.product(q, "cap", "Cap", 10, 1500)
	tb := openTab(t, browser, "expired", s.gateway.URL+"/q/"+q)
	tb.signIn("shopper-expired")
	tb.click("enter")
	st := tb.waitFor("the turn", 10*time.Second, func(p pageState) bool { return p.Shown["turn"] })
	turnAt := time.Now()
	if !regexp.MustCompile(`^◷ Your pass expires in [12] sec\.$`).MatchString(st.Expiry) {
		t.Fatalf("expiry countdown %q, want 1 or 2 s", st.Expiry)
	}
	tb.shot("turn")
	st = tb.waitFor("the expired message", 10*time.Second, func(p pageState) bool {
		return strings.HasPrefix(p.Status, "Your turn expired") && p.Shown["enter-again"]
	})
	if st.Shown["turn"] || st.Kind != "warn" {
		t.Fatalf("expired: %v", st)
	}
	t.Logf("expired %s after the turn was shown: %q", time.Since(turnAt).Round(time.Millisecond), st.Status)
	tb.shot("expired")
	tb.audit("expired")

	// Pause the line, so that the new place holds still to be read.
	s.queue(q, map[string]any{"state": "PAUSED"})
	tb.click("enter-again")
	st = tb.waitFor("a new place in line", 10*time.Second, func(p pageState) bool { return p.Shown["figures"] && p.Position == "1" })
	if st.Ahead != "0" || !strings.Contains(st.QueueState, "paused") || st.Shown["enter-again"] || st.Shown["turn"] {
		t.Fatalf("back in line: %v", st)
	}
	tb.shot("back-in-line")
}

// The gateway tells the page a notification-service address nothing listens
// on: the page follows the line by polling and gets the turn. The first order
// meets a database outage (503): the page waits for the pass to come back
// (the dispatcher restores it) and the second order goes through.
func browserPollingFallback(t *testing.T, s *browserSystem, browser context.Context, q string) {
	s.queue(q, map[string]any{"state": "PAUSED", "admissionRatePerSec": 2, "activationSpreadMs": 0})
	s.product(q, "mug", "Mug", 3, 1250)
	s.enter(q, "zed")
	const buyer = "shopper-polling"
	tb := openTab(t, browser, "polling", s.pollingGateway.URL+"/q/"+q)
	tb.signIn(buyer)
	tb.click("enter")
	st := tb.waitFor("place 2", 10*time.Second, func(p pageState) bool { return p.Shown["figures"] && p.Position == "2" })
	if st.Ahead != "1" || !strings.Contains(st.QueueState, "paused") {
		t.Fatalf("place 2: %v", st)
	}
	tb.shot("place-2")
	var trail positionTrail
	trail.add(st)
	s.queue(q, map[string]any{"state": "OPEN"})
	moved := time.Now()
	ready := func(p pageState) bool { return p.Shown["order-form"] && len(p.Quantities) > 0 && !p.OrderDisabled }
	st = tb.waitFor("the order form", 15*time.Second, func(p pageState) bool { trail.add(p); return ready(p) })
	t.Logf("polling: places shown %v, order form %s after the line moved", trail, time.Since(moved).Round(time.Millisecond))
	if want := "Mug — $12.50 — 3 left"; len(st.Products) != 1 || st.Products[0] != want || strings.Join(st.Quantities, ",") != "1,2,3" {
		t.Fatalf("products %q quantities %v, want [%q] and 1..3", st.Products, st.Quantities, want)
	}
	tb.shot("order-form")

	s.db.Cut()
	cut := true
	defer func() {
		if cut {
			s.db.Restore()
		}
	}()
	tb.click("order")
	// "...is being given back" until the pass is back, then "...was given back: try again".
	st = tb.waitFor("the order-failed message", 15*time.Second, func(p pageState) bool { return strings.HasPrefix(p.Status, "Your order failed; your pass") })
	if st.Kind != "warn" || st.Shown["result"] {
		t.Fatalf("order failed: %v", st)
	}
	t.Logf("database cut: %q", st.Status)
	tb.shot("order-failed")
	tb.audit("order-failed")
	s.db.Restore()
	cut = false
	failedAt := time.Now()
	st = tb.waitFor("the pass back", 20*time.Second, func(p pageState) bool {
		return ready(p) && p.Status == "Your order failed; your pass was given back: try again."
	})
	if st.Kind != "warn" || len(st.Products) != 1 || st.Products[0] != "Mug — $12.50 — 3 left" {
		t.Fatalf("the pass back: %v", st)
	}
	t.Logf("the pass came back and the form was enabled %s after the database returned", time.Since(failedAt).Round(time.Millisecond))
	tb.shot("token-given-back")
	tb.audit("pass-given-back")
	tb.click("order")
	st = tb.waitFor("the order confirmation", 15*time.Second, func(p pageState) bool { return p.Shown["result"] && p.OrderID != "" })
	if code, order := s.call(http.MethodGet, s.order.URL+"/api/v1/orders/"+st.OrderID, buyer, "", nil); code != http.StatusOK || order["quantity"] != 1.0 {
		t.Fatalf("GET order %s: %d %v", st.OrderID, code, order)
	}
	tb.shot("confirmed")
}

// drawing is what the pre-queue's countdown says from the start until the
// page learns its drawn place.
const drawing = "Drawing places…"

var startsIn = regexp.MustCompile(`^Sale starts in 00:(\d\d)$`)

// A sale that starts about 8 s after three buyers signed in. They enter
// before the start and wait in its pre-queue: each page counts down by
// itself, shows how many wait and says that the start draws the places, and
// asks the gateway nothing more before the start. At the start the pages say
// the places are being drawn until they learn theirs: places 1 to 3, in the
// order the seed published after the draw gives (HMAC-SHA256 of each id), and
// a fourth buyer who enters after the start is place 4. Then the line moves:
// everyone is admitted in place order and the first orders.
func browserScheduledDrop(t *testing.T, s *browserSystem, browser context.Context, q string) {
	// Paused, so that the drawn places hold still to be read: the draw
	// happens at the start whatever the state, admission only once OPEN.
	s.queue(q, map[string]any{"state": "PAUSED", "admissionRatePerSec": 2, "activationSpreadMs": 0,
		"startsAt": time.Now().Add(time.Hour).UTC().Format(time.RFC3339)})
	s.product(q, "hoodie", "Drop hoodie", 5, 6000)
	early := []string{"early-ann", "early-bo", "early-cy"}
	tabs := make([]*tab, len(early))
	for i, u := range early {
		tabs[i] = openTab(t, browser, "drop-"+u, s.gateway.URL+"/q/"+q)
		tabs[i].signIn(u)
	}
	late := openTab(t, browser, "drop-late", s.gateway.URL+"/q/"+q)
	late.signIn("late-dee")

	// Everyone is signed in: bring the start close, but far enough that
	// the checks before it (three enters, a reload, two readings of every
	// countdown) end before it on a busy machine too, where each takes
	// seconds.
	const lead = 30 * time.Second
	startsAt := time.Now().Add(lead).Truncate(time.Second)
	s.queue(q, map[string]any{"startsAt": startsAt.UTC().Format(time.RFC3339)})
	t.Logf("the sale starts at %s, in %s", startsAt.Format(time.RFC3339), time.Until(startsAt).Round(time.Millisecond))
	// tabs[1] is not reloaded below: it must ask nothing between its enter
	// and the start (its next poll is spread after the start).
	quiet := tabs[1].recordRequests()
	polls := func(r sentRequest) bool {
		return r.method == http.MethodGet && strings.Contains(r.url, "/api/v1/queues/"+q+"/position")
	}
	streams := func(r sentRequest) bool { return strings.Contains(r.url, "/api/v1/queues/"+q+"/events") }

	for i, tb := range tabs {
		tb.click("enter")
		st := tb.waitFor("the pre-queue", 5*time.Second, func(p pageState) bool { return p.Shown["prequeue"] })
		// Each saw the pre-queue as it entered: i people before it, and itself.
		if st.PreQueued != strconv.Itoa(i+1) || st.Shown["figures"] || st.Shown["enter"] || st.Kind != "wait" ||
			!strings.HasPrefix(st.Status, "You are waiting for the sale to start") ||
			strings.Join(strings.Fields(st.DrawNote), " ") != "Everyone who arrives before the start gets a randomly drawn place in line, so arriving early gives no advantage." {
			t.Fatalf("%s after entering before the start: %v (draw note %q)", tb.name, st, st.DrawNote)
		}
		countdownNear(t, tb.name, st, startsAt)
	}
	for _, u := range early {
		v := s.position(q, u)
		at, err := time.Parse(time.RFC3339Nano, fmt.Sprint(v["startsAt"]))
		ms, _ := v["startsInMs"].(float64)
		if v["state"] != "PRE_QUEUE" || v["position"] != 0.0 || v["preQueued"] != float64(len(early)) ||
			err != nil || !at.Equal(startsAt) || ms <= 0 || ms > float64(lead.Milliseconds()) {
			t.Fatalf("%s before the start, as the gateway tells it: %v", u, v)
		}
	}
	// A reload asks again: the count is the gateway's, not the page's.
	tabs[0].do(chromedp.Reload())
	st := tabs[0].waitFor("the pre-queue after a reload", 5*time.Second, func(p pageState) bool { return p.Shown["prequeue"] })
	if st.PreQueued != strconv.Itoa(len(early)) {
		t.Fatalf("reloaded before the start: %v, want %d pre-queued", st, len(early))
	}
	countdownNear(t, tabs[0].name, st, startsAt)
	tabs[0].shot("pre-queue")
	tabs[0].audit("pre-queue")

	// The countdown runs on each page by itself.
	first := make([]int, len(tabs))
	for i, tb := range tabs {
		first[i] = countdownNear(t, tb.name, tb.waitFor("a reading", 5*time.Second, func(pageState) bool { return true }), startsAt)
	}
	time.Sleep(1100 * time.Millisecond)
	for i, tb := range tabs {
		st := tb.waitFor("a second reading", 5*time.Second, func(pageState) bool { return true })
		if n := countdownNear(t, tb.name, st, startsAt); n >= first[i] || n < first[i]-2 {
			t.Fatalf("%s: the countdown read %d s, then %d s 1.1 s later", tb.name, first[i], n)
		}
	}
	t.Logf("countdowns read %v s, then one lower, %s before the start", first, time.Until(startsAt).Round(time.Millisecond))
	tabs[1].shot("countdown")

	// At the start every page says the places are being drawn until it
	// learns its own (its first poll comes half a second after the start at
	// the earliest).
	for _, tb := range tabs {
		st := tb.waitFor("the start", time.Until(startsAt)+5*time.Second, func(p pageState) bool {
			return p.StartsIn == drawing || p.Shown["figures"]
		})
		if st.StartsIn != drawing || st.Shown["figures"] || !strings.HasPrefix(st.Status, "The sale has started. Drawing places") {
			t.Fatalf("%s at the start: %v", tb.name, st)
		}
		if before := time.Until(startsAt); before > 300*time.Millisecond {
			t.Fatalf("%s said %q %s before the start", tb.name, drawing, before)
		}
	}
	// Counted by when the browser sent them: on a busy machine the loop
	// above may end after the first poll after the start went out.
	beforeStart := func(match func(sentRequest) bool) func(sentRequest) bool {
		return func(r sentRequest) bool { return match(r) && r.at.Before(startsAt) }
	}
	if n, m := quiet.count(beforeStart(polls)), quiet.count(beforeStart(streams)); n != 0 || m != 0 {
		t.Fatalf("%s asked the gateway for its position %d times and opened %d streams between its enter and the start, want 0 and 0", tabs[1].name, n, m)
	}
	t.Logf("all %d pages said %q %s after the start", len(tabs), drawing, time.Since(startsAt).Round(time.Millisecond))
	tabs[0].shot("drawing")

	// The drawn places: 1 to n, each once, as the page and the gateway tell them.
	places := map[string]int{}
	taken := map[int]bool{}
	for i, tb := range tabs {
		st := tb.waitFor("the drawn place", 10*time.Second, func(p pageState) bool { return p.Shown["figures"] && atoi(p.Position) >= 1 })
		place := atoi(st.Position)
		if place > len(early) || taken[place] || st.Ahead != strconv.Itoa(place-1) || st.Shown["prequeue"] ||
			!strings.Contains(st.QueueState, "paused") {
			t.Fatalf("%s after the draw: %v; places so far %v", tb.name, st, places)
		}
		if v := s.position(q, early[i]); v["state"] != "WAITING" || v["position"] != float64(place) {
			t.Fatalf("%s shows place %d, the gateway tells %v", early[i], place, v)
		}
		taken[place] = true
		places[early[i]] = place
		tb.shot(fmt.Sprintf("drawn-place-%d", place))
		tb.audit("drawn-place")
	}
	t.Logf("drawn places %v, all shown %s after the start", places, time.Since(startsAt).Round(time.Millisecond))
	drawnInOrder(t, s, q, early, places)

	late.click("enter")
	st = late.waitFor("a place after the start", 10*time.Second, func(p pageState) bool { return p.Shown["figures"] && atoi(p.Position) >= 1 })
	if st.Position != strconv.Itoa(len(early)+1) || st.Ahead != strconv.Itoa(len(early)) || st.Shown["prequeue"] {
		t.Fatalf("entered after the start, behind %d drawn places: %v", len(early), st)
	}
	late.shot("after-the-start")

	// The line moves: each is admitted, in place order.
	s.queue(q, map[string]any{"state": "OPEN"})
	all := append(append([]*tab{}, tabs...), late)
	users := append(append([]string{}, early...), "late-dee")
	for _, tb := range all {
		tb.waitFor("the turn", 15*time.Second, func(p pageState) bool {
			return p.Shown["order-form"] && len(p.Quantities) > 0 && !p.OrderDisabled
		})
	}
	byPlace := make([]string, len(users))
	for _, u := range users {
		place := len(users) // late-dee
		if p, ok := places[u]; ok {
			place = p
		}
		byPlace[place-1] = u
	}
	var last time.Time
	for place, u := range byPlace {
		v := s.position(q, u)
		at, err := time.Parse(time.RFC3339Nano, fmt.Sprint(v["activateAt"]))
		if v["state"] != "ADMITTED" || err != nil || at.Before(last) {
			t.Fatalf("place %d (%s) admitted at %v after the place before it at %s: %v", place+1, u, v["activateAt"], last, v)
		}
		last = at
	}
	t.Logf("admitted in place order %v", byPlace)

	buyer := all[slices.Index(users, byPlace[0])]
	buyer.shot("turn")
	buyer.click("order")
	st = buyer.waitFor("the order confirmation", 15*time.Second, func(p pageState) bool { return p.Shown["result"] && p.OrderID != "" })
	if code, order := s.call(http.MethodGet, s.order.URL+"/api/v1/orders/"+st.OrderID, byPlace[0], "", nil); code != http.StatusOK ||
		order["productId"] != "hoodie" || order["quantity"] != 1.0 || order["queueId"] != q {
		t.Fatalf("GET order %s as %s: %d %v", st.OrderID, byPlace[0], code, order)
	}
	buyer.shot("confirmed")
}

// countdownNear checks that the page shows a countdown to startsAt within a
// second of the test's own, and returns its seconds.
func countdownNear(t *testing.T, name string, st pageState, startsAt time.Time) int {
	t.Helper()
	left := time.Until(startsAt)
	m := startsIn.FindStringSubmatch(st.StartsIn)
	if m == nil {
		t.Fatalf("%s: no countdown with %s left to the start: %v", name, left.Round(time.Millisecond), st)
	}
	n := atoi(m[1])
	if want := int(math.Ceil(left.Seconds())); n < want-1 || n > want+1 {
		t.Fatalf("%s: countdown %q with %s left to the start", name, st.StartsIn, left.Round(time.Millisecond))
	}
	return n
}

// drawnInOrder checks the draw as an auditor would once it is done: the
// published seed matches the SHA-256 published before, and orders the
// pre-queued ids (HMAC-SHA256 keyed with the seed, ascending) as the places
// were given.
func drawnInOrder(t *testing.T, s *browserSystem, q string, users []string, places map[string]int) {
	t.Helper()
	var draw map[string]any
	deadline := time.Now().Add(5 * time.Second)
	for {
		code, v := s.call(http.MethodGet, s.gateway.URL+"/admin/v1/queues/"+q, "ops", auth.RoleAdmin, nil)
		draw, _ = v["draw"].(map[string]any)
		if code == http.StatusOK && draw["state"] == "DRAWN" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the draw is not DRAWN 5 s after every place was shown: %d %v", code, v)
		}
		time.Sleep(50 * time.Millisecond)
	}
	seed, _ := draw["seed"].(string)
	sha, err := queue.SeedSHA256(seed)
	if err != nil || sha != draw["seedSha256"] || draw["preQueued"] != float64(len(users)) || draw["placed"] != float64(len(users)) {
		t.Fatalf("the draw as published: %v (SHA-256 of the seed %s, %v)", draw, sha, err)
	}
	order, err := queue.DrawOrder(seed, users)
	if err != nil {
		t.Fatal(err)
	}
	for i, u := range order {
		if places[u] != i+1 {
			t.Fatalf("the seed draws %v, the places given are %v", order, places)
		}
	}
}
