package httpapi_test

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/waitingroom/waitingroom/pkg/queue"
	"github.com/waitingroom/waitingroom/pkg/redisstore"
	"github.com/waitingroom/waitingroom/pkg/testenv"
	"github.com/waitingroom/waitingroom/pkg/ticket"
)

// pollWith is a position poll carrying a ticket.
func (h *harness) pollWith(q, user, tk string) (response, standing) {
	h.t.Helper()
	r := h.must(http.MethodGet, "/api/v1/queues/"+q+"/position", h.token(user, ""), nil, "X-Queue-Ticket", tk)
	var st standing
	if r.status == http.StatusOK {
		r.json(h.t, &st)
	}
	return r, st
}

// reads is the gateway's position_reads_total for source.
func (h *harness) reads(source string) int {
	h.t.Helper()
	mfs, err := h.reg.Gather()
	if err != nil {
		h.t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "waitingroom_gateway_position_reads_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			if m.GetLabel()[0].GetValue() == source {
				return int(m.GetCounter().GetValue())
			}
		}
	}
	return 0
}

// fillLine enters n people (user-00000..) and returns their tickets.
func (h *harness) fillLine(q string, n int) []string {
	h.t.Helper()
	tickets := make([]string, n)
	for i := range n {
		r, st, err := h.enter(q, userID(i))
		if err != nil || r.status != http.StatusOK || st.State != "WAITING" || st.Ticket == "" {
			h.t.Fatalf("enter %d: %d %s %v", i, r.status, r.body, err)
		}
		tickets[i] = st.Ticket
	}
	return tickets
}

// TestTicketPollsFarFromTheFrontAreAnsweredFromMemory: enter hands out a
// ticket; a poll with it far from the front is answered from the frontier
// (no Redis read), at the exact place while nobody left; near the front
// the store answers; a poll without a ticket gets one.
func TestTicketPollsFarFromTheFrontAreAnsweredFromMemory(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	q := h.newQueue(map[string]any{"admissionRatePerSec": 50})
	tickets := h.fillLine(q, 200)
	// The first poll makes the gateway track q; its frontier comes next.
	h.pollWith(q, userID(150), tickets[150])
	deadline := time.Now().Add(3 * time.Second)
	for h.frontiers.Lookup(q) == nil {
		if time.Now().After(deadline) {
			t.Fatal("no frontier of the queue after 3 s")
		}
		time.Sleep(10 * time.Millisecond)
	}
	store0, front0 := h.reads("store"), h.reads("frontier")
	for _, i := range []int{20, 77, 150, 199} {
		r, st := h.pollWith(q, userID(i), tickets[i])
		if r.status != http.StatusOK || st.State != "WAITING" || st.Position != int64(i+1) || st.Total != 200 || st.Ticket != tickets[i] {
			t.Fatalf("poll of %d: %d %+v", i, r.status, st)
		}
	}
	// Places 1..10 are two batches of 5 (50/s): Redis answers them.
	for _, i := range []int{0, 9} {
		if r, st := h.pollWith(q, userID(i), tickets[i]); r.status != http.StatusOK || st.Position != int64(i+1) {
			t.Fatalf("poll of %d: %d %+v", i, r.status, st)
		}
	}
	// No ticket: the store answers, with a ticket.
	r, st := h.position(q, userID(42))
	if r.status != http.StatusOK || st.Position != 43 || st.Ticket != tickets[42] {
		t.Fatalf("ticketless poll: %d %+v (ticket %q, enter gave %q)", r.status, st, st.Ticket, tickets[42])
	}
	if got, want := h.reads("frontier")-front0, 4; got != want {
		t.Fatalf("%d polls answered from the frontier, want %d", got, want)
	}
	if got, want := h.reads("store")-store0, 3; got != want {
		t.Fatalf("%d polls answered by Redis, want %d", got, want)
	}
}

// TestTicketsNotIssuedToTheCallerAre403AndChangeNothing: a forged, altered,
// other queue's or other user's ticket is refused before anything is read,
// and the line is as it was.
func TestTicketsNotIssuedToTheCallerAre403AndChangeNothing(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	q := h.newQueue(nil)
	other := h.newQueue(nil)
	tickets := h.fillLine(q, 30)
	_, otherSt, _ := h.enter(other, userID(5))
	if otherSt.Ticket == "" {
		t.Fatal("no ticket from the other queue's enter")
	}
	forged, err := ticket.NewSigner(bytes.Repeat([]byte("k"), 32))
	if err != nil {
		t.Fatal(err)
	}
	flip := []byte(tickets[5])
	flip[3] ^= 1
	cases := map[string]string{
		"forged (another key)": forged.Sign(q, userID(5), ticket.Place{Seq: 6}),
		"altered":              string(flip),
		"other queue's":        otherSt.Ticket,
		"other user's":         tickets[7],
		"garbage":              "not-a-ticket",
		"too long":             strings.Repeat("A", 4096),
	}
	ctx := context.Background()
	k := redisstore.KeysFor(q)
	before, err := h.rdb.ZRangeWithScores(ctx, k.Waiting(), 0, -1).Result()
	if err != nil {
		t.Fatal(err)
	}
	store0, front0 := h.reads("store"), h.reads("frontier")
	for name, tk := range cases {
		r, _ := h.pollWith(q, userID(5), tk)
		p := r.problem(t, http.StatusForbidden, "ticket-invalid")
		if p.Title == "" || strings.Contains(string(r.body), userID(7)) {
			t.Fatalf("%s: %s", name, r.body)
		}
	}
	after, err := h.rdb.ZRangeWithScores(ctx, k.Waiting(), 0, -1).Result()
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(before) != fmt.Sprint(after) || len(after) != 30 {
		t.Fatalf("the line changed: %d before, %d after", len(before), len(after))
	}
	if h.reads("store") != store0 || h.reads("frontier") != front0 {
		t.Fatalf("a refused ticket was answered: store %d->%d, frontier %d->%d", store0, h.reads("store"), front0, h.reads("frontier"))
	}
	if r, st := h.pollWith(q, userID(5), tickets[5]); r.status != http.StatusOK || st.Position != 6 {
		t.Fatalf("the holder's own ticket afterwards: %d %+v", r.status, st)
	}
}

// TestTicketKeyRotation: a gateway whose TICKET_KEYS list the new key
// first and the old one second accepts the old tickets and signs new ones
// with the new key; once the old key is dropped its tickets are refused.
func TestTicketKeyRotation(t *testing.T) {
	t.Parallel()
	oldKey, newKey := bytes.Repeat([]byte("o"), 32), bytes.Repeat([]byte("n"), 32)
	before := newHarness(t, withTicketKeys(oldKey))
	q := before.newQueue(nil)
	oldTickets := before.fillLine(q, 3)

	during := newHarness(t, withTicketKeys(newKey, oldKey), withRedisURL(testenv.RedisURL(t)))
	if r, st := during.pollWith(q, userID(2), oldTickets[2]); r.status != http.StatusOK || st.Position != 3 {
		t.Fatalf("old ticket during rotation: %d %s", r.status, r.body)
	}
	_, st := during.position(q, userID(2))
	newSigner, _ := ticket.NewSigner(newKey)
	if p, err := newSigner.Check(q, userID(2), st.Ticket); err != nil || p.Seq <= 0 {
		t.Fatalf("ticket handed out during rotation %q is not the new key's: %v", st.Ticket, err)
	}
	after := newHarness(t, withTicketKeys(newKey), withRedisURL(testenv.RedisURL(t)))
	r, _ := after.pollWith(q, userID(2), oldTickets[2])
	r.problem(t, http.StatusForbidden, "ticket-invalid")
	if r, got := after.pollWith(q, userID(2), st.Ticket); r.status != http.StatusOK || got.Position != 3 {
		t.Fatalf("new ticket after rotation: %d %s", r.status, r.body)
	}
}

// TestTicketRotationMovesFrontierAnswersToTheNewKey: during a rotation
// (TICKET_KEYS new,old) a poll with an old-key ticket answered from the
// frontier hands back the same place signed with the new key, not the old
// ticket; once the old key is dropped that ticket is answered, from the
// frontier too, and the holder never got a 403.
func TestTicketRotationMovesFrontierAnswersToTheNewKey(t *testing.T) {
	t.Parallel()
	oldKey, newKey := bytes.Repeat([]byte("o"), 32), bytes.Repeat([]byte("n"), 32)
	newOnly, err := ticket.NewSigner(newKey)
	if err != nil {
		t.Fatal(err)
	}
	before := newHarness(t, withTicketKeys(oldKey))
	q := before.newQueue(map[string]any{"admissionRatePerSec": 50})
	oldTickets := before.fillLine(q, 200)
	const holder = 150
	refused, polls := 0, 0
	// poll is the holder's poll on gateway g with tk; it must be answered
	// from the frontier when fromFrontier is set.
	poll := func(g *harness, tk string, fromFrontier bool) standing {
		t.Helper()
		front0 := g.reads("frontier")
		r, st := g.pollWith(q, userID(holder), tk)
		polls++
		if r.status == http.StatusForbidden {
			refused++
		}
		if r.status != http.StatusOK || st.State != "WAITING" || st.Position != holder+1 {
			t.Fatalf("poll %d: %d %s", polls, r.status, r.body)
		}
		if got := g.reads("frontier") - front0; fromFrontier && got != 1 {
			t.Fatalf("poll %d: %d answers from the frontier, want 1", polls, got)
		}
		return st
	}
	// track makes gateway g follow q's frontier with another person's
	// valid ticket (a gateway's first ticket poll of a queue goes to
	// Redis), waits for it, and returns the ticket that poll handed back.
	track := func(g *harness, tk string) string {
		t.Helper()
		r, st := g.pollWith(q, userID(100), tk)
		if r.status != http.StatusOK || st.Ticket == "" {
			t.Fatalf("tracking poll: %d %s", r.status, r.body)
		}
		deadline := time.Now().Add(3 * time.Second)
		for g.frontiers.Lookup(q) == nil {
			if time.Now().After(deadline) {
				t.Fatal("no frontier of the queue after 3 s")
			}
			time.Sleep(10 * time.Millisecond)
		}
		return st.Ticket
	}

	during := newHarness(t, withTicketKeys(newKey, oldKey), withRedisURL(testenv.RedisURL(t)))
	other := track(during, oldTickets[100])
	st := poll(during, oldTickets[holder], true)
	moved, err := newOnly.Check(q, userID(holder), st.Ticket)
	if err != nil || moved.Seq != int64(holder+1) {
		t.Fatalf("the frontier's answer to an old-key ticket carries %q (%+v, %v), want the place signed with the new key", st.Ticket, moved, err)
	}
	if again := poll(during, st.Ticket, true); again.Ticket != st.Ticket {
		t.Fatalf("a new-key ticket came back as %q, want itself", again.Ticket)
	}

	after := newHarness(t, withTicketKeys(newKey), withRedisURL(testenv.RedisURL(t)))
	track(after, other)
	if got := poll(after, st.Ticket, true); got.Ticket != st.Ticket {
		t.Fatalf("after the old key was dropped: ticket %q, want %q", got.Ticket, st.Ticket)
	}
	if refused != 0 || polls != 3 {
		t.Fatalf("%d of the holder's %d polls refused, want 0 of 3", refused, polls)
	}
}

// TestTicketPollSeesAdmissionAtOnce: people polling with tickets every
// 10 ms see ADMITTED at their first poll that begins after the tick that
// issued their token has returned: no poll answered from a frontier that
// has not heard of the tick yet says WAITING to someone admitted (their
// place is within two batches of the front, which Redis answers). Counted,
// not timed: a busy machine delays polls, never makes one wrong.
func TestTicketPollSeesAdmissionAtOnce(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	q := h.newQueue(map[string]any{"admissionRatePerSec": 100, "activationSpreadMs": 0})
	const n = 40
	tickets := h.fillLine(q, n)
	ctx := context.Background()
	epoch, err := h.store.AcquireLease(ctx, q, "test", 10*time.Second)
	if err != nil || epoch == 0 {
		t.Fatalf("lease: %d %v", epoch, err)
	}
	seen := make([]time.Time, n)
	// lastWaiting is when the last poll of each that did not say ADMITTED
	// began.
	lastWaiting := make([]time.Time, n)
	errs := make(chan error, n)
	stop := make(chan struct{})
	for i := range n {
		go func() {
			for {
				select {
				case <-stop:
					errs <- fmt.Errorf("%s never saw ADMITTED", userID(i))
					return
				case <-time.After(10 * time.Millisecond):
				}
				began := time.Now()
				r, err := h.do(http.MethodGet, "/api/v1/queues/"+q+"/position", h.token(userID(i), ""), nil, "X-Queue-Ticket", tickets[i])
				if err != nil || r.status != http.StatusOK {
					errs <- fmt.Errorf("poll %d: %v %d %s", i, err, r.status, r.body)
					return
				}
				if bytes.Contains(r.body, []byte(`"state":"ADMITTED"`)) {
					seen[i] = time.Now()
					errs <- nil
					return
				}
				lastWaiting[i] = began
			}
		}()
	}
	// The leader: a tick of 10 every 100 ms; when each token was issued.
	issuedAt := make([]time.Time, n)
	grants := make([]queue.Grant, 20)
	for i := range grants {
		if grants[i], err = queue.NewGrant(); err != nil {
			t.Fatal(err)
		}
	}
	admitted := 0
	for admitted < n {
		time.Sleep(100 * time.Millisecond)
		res, err := h.store.Issue(ctx, q, queue.IssueRequest{Epoch: epoch, Tick: 100 * time.Millisecond, Grants: grants})
		if err != nil {
			t.Fatal(err)
		}
		at := time.Now()
		for j := admitted; j < admitted+res.Issued && j < n; j++ {
			issuedAt[j] = at
		}
		admitted += res.Issued
		for i := range grants {
			grants[i], _ = queue.NewGrant()
		}
	}
	timer := time.AfterFunc(3*time.Second, func() { close(stop) })
	defer timer.Stop()
	var worst time.Duration
	for range n {
		if err := <-errs; err != nil {
			t.Error(err)
		}
	}
	late := 0
	for i := range n {
		if lastWaiting[i].After(issuedAt[i]) {
			late++
			t.Errorf("%s: a poll begun %v after the tick that admitted them said WAITING", userID(i), lastWaiting[i].Sub(issuedAt[i]))
		}
		if d := seen[i].Sub(issuedAt[i]); d > worst {
			worst = d
		}
	}
	t.Logf("%d people polling with tickets every 10 ms: %d polls after their tick not ADMITTED; ADMITTED seen at most %s after the tick", n, late, worst.Round(time.Millisecond))
}
