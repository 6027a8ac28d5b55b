package httpapi_test

import (
	"context"
	"fmt"
	"math"
	"net/http"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/waitingroom/waitingroom/pkg/redisstore"
)

func TestThousandConcurrentEntersIntoALineOfHundred(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	q := h.newQueue(map[string]any{"maxQueueSize": 100})

	const n = 1000
	type result struct {
		status   int
		typ      string
		retry    string
		position int64
		err      error
	}
	results := make([]result, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			r, st, err := h.enter(q, userID(i))
			res := result{status: r.status, retry: r.header.Get("Retry-After"), position: st.Position, err: err}
			if err == nil && r.status != http.StatusOK {
				var p problemBody
				r.json(t, &p)
				res.typ = p.Type
			}
			results[i] = res
		})
	}
	wg.Wait()

	var positions []int64
	full := 0
	for i, r := range results {
		switch {
		case r.err != nil:
			t.Errorf("user %d: %v", i, r.err)
		case r.status == http.StatusOK:
			positions = append(positions, r.position)
		case r.status == http.StatusServiceUnavailable && r.typ == "queue-full" && r.retry != "":
			full++
		default:
			t.Errorf("user %d: status %d type %q Retry-After %q", i, r.status, r.typ, r.retry)
		}
	}
	if len(positions) != 100 || full != 900 {
		t.Fatalf("%d waiting, %d queue-full; want 100 and 900", len(positions), full)
	}
	// Every admitted place is distinct: 1..100, no two people share one.
	sort.Slice(positions, func(a, b int) bool { return positions[a] < positions[b] })
	for i, p := range positions {
		if p != int64(i+1) {
			t.Fatalf("positions handed out: %v; want exactly 1..100", positions)
		}
	}
	if z := h.zcard(q); z != 100 {
		t.Fatalf("ZCARD = %d, want 100", z)
	}
}

func TestSequentialEntersGetPositionsInOrder(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	q := h.newQueue(nil)
	const n = 2000
	for i := 1; i <= n; i++ {
		r, st, err := h.enter(q, userID(i))
		if err != nil || r.status != http.StatusOK {
			t.Fatalf("enter %d: %d %s %v", i, r.status, r.body, err)
		}
		if st.State != "WAITING" || st.Position != int64(i) || st.Ahead != int64(i-1) || st.Total != int64(i) {
			t.Fatalf("enter %d: state %s position %d ahead %d total %d", i, st.State, st.Position, st.Ahead, st.Total)
		}
	}
	// A refresh never moves anyone back: entering again and polling give the same place.
	for _, i := range []int{1, 2, 999, 1000, 2000} {
		_, st, err := h.enter(q, userID(i))
		if err != nil || st.Position != int64(i) {
			t.Fatalf("re-enter %d: position %d err %v", i, st.Position, err)
		}
		if _, p := h.position(q, userID(i)); p.Position != int64(i) || p.Total != n {
			t.Fatalf("position %d: got %d of %d", i, p.Position, p.Total)
		}
	}
	if z := h.zcard(q); z != n {
		t.Fatalf("ZCARD = %d, want %d", z, n)
	}
}

func TestOneUserEnteringFiftyTimesConcurrently(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	q := h.newQueue(nil)
	for i := range 7 {
		if r, _, err := h.enter(q, userID(i)); err != nil || r.status != http.StatusOK {
			t.Fatalf("enter %d: %d %v", i, r.status, err)
		}
	}
	const n = 50
	positions := make([]int64, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			r, st, err := h.enter(q, "the-same-user")
			if err == nil && r.status != http.StatusOK {
				err = fmt.Errorf("status %d: %s", r.status, r.body)
			}
			positions[i], errs[i] = st.Position, err
		})
	}
	wg.Wait()
	for i := range n {
		if errs[i] != nil || positions[i] != 8 {
			t.Errorf("enter #%d: position %d err %v; want 8", i, positions[i], errs[i])
		}
	}
	if z := h.zcard(q); z != 8 {
		t.Fatalf("ZCARD = %d, want 8 (7 others + one member for the user)", z)
	}
}

func TestTokenHolderEntersAdmittedWithThatToken(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	q := h.newQueue(nil)
	h.grantToken(q, "lucky", "s3cr3t-token", "tok-42", 2*time.Minute)

	r, st, err := h.enter(q, "lucky")
	if err != nil || r.status != http.StatusOK {
		t.Fatalf("enter: %d %v", r.status, err)
	}
	if st.State != "ADMITTED" || st.Token != "s3cr3t-token" || st.TokenID != "tok-42" || st.Position != 0 {
		t.Fatalf("enter = %+v; want ADMITTED with the granted token", st)
	}
	act, err1 := time.Parse(time.RFC3339Nano, st.ActivateAt)
	exp, err2 := time.Parse(time.RFC3339Nano, st.ExpiresAt)
	if err1 != nil || err2 != nil {
		t.Fatalf("activateAt %q expiresAt %q are not RFC 3339", st.ActivateAt, st.ExpiresAt)
	}
	if d := exp.Sub(act); d < 118*time.Second || d > 120*time.Second {
		t.Fatalf("expiresAt - activateAt = %v, want about 119s", d)
	}
	if z := h.zcard(q); z != 0 {
		t.Fatalf("ZCARD = %d, want 0: a token holder takes no place", z)
	}
	if r.header.Get("Cache-Control") != "no-store" {
		t.Fatalf("Cache-Control = %q: a response with a token must not be cached", r.header.Get("Cache-Control"))
	}
}

func TestPositionInEachState(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	q := h.newQueue(nil)
	ctx := context.Background()
	k := redisstore.KeysFor(q)
	for _, u := range []string{"first", "second", "third"} {
		if r, _, err := h.enter(q, u); err != nil || r.status != http.StatusOK {
			t.Fatalf("enter %s: %d %v", u, r.status, err)
		}
	}
	h.grantToken(q, "admitted", "sec", "tid", time.Minute)
	h.rdb.Set(ctx, k.Status("expired"), redisstore.StatusTokenIssued, time.Minute)
	h.rdb.Set(ctx, k.Status("ordered"), redisstore.StatusOrdered, time.Minute)

	tests := []struct {
		user, state string
		position    int64
		token       bool
	}{
		{"second", "WAITING", 2, false},
		{"admitted", "ADMITTED", 0, true},
		{"expired", "EXPIRED", 0, false},
		{"ordered", "ORDERED", 0, false},
		{"nobody", "NOT_IN_QUEUE", 0, false},
	}
	for _, tt := range tests {
		r, st := h.position(q, tt.user)
		if r.status != http.StatusOK {
			t.Fatalf("%s: status %d %s", tt.user, r.status, r.body)
		}
		if st.State != tt.state || st.Position != tt.position || (st.Token != "") != tt.token || st.Total != 3 || st.QueueID != q {
			t.Errorf("%s: %+v; want state %s position %d token %v total 3", tt.user, st, tt.state, tt.position, tt.token)
		}
		if r.header.Get("Retry-After") == "" || st.RetryAfterMs < 900 {
			t.Errorf("%s: Retry-After %q retryAfterMs %d", tt.user, r.header.Get("Retry-After"), st.RetryAfterMs)
		}
	}
	r := h.must(http.MethodGet, "/api/v1/queues/no-such-"+q+"/position", h.token("u", ""), nil)
	r.problem(t, http.StatusNotFound, "queue-not-found")
}

func TestRetryAfterRisesWithPositionAndETAFollowsRate(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	// 2 per second, configured: the ETA of position p is p/2 s.
	q := h.newQueue(map[string]any{"admissionRatePerSec": 2, "maxWaitSeconds": 86400})
	ctx := context.Background()
	const n = 3000
	for i := 1; i <= n; i++ {
		if _, err := h.store.Enter(ctx, q, userID(i)); err != nil {
			t.Fatal(err)
		}
	}
	// Un-jittered expectations: 1 s up to 100, +1 s per doubling, capped at 10 s.
	tests := []struct {
		pos       int
		retryBase float64 // ms
	}{
		{1, 1000}, {100, 1000}, {200, 2000}, {800, 4000}, {3000, 1000 + 1000*math.Log2(30)},
	}
	prev := int64(0)
	for _, tt := range tests {
		r, st := h.position(q, userID(tt.pos))
		if r.status != http.StatusOK {
			t.Fatalf("position %d: %d", tt.pos, r.status)
		}
		if want := int64(math.Ceil(float64(tt.pos) / 2)); st.EtaSeconds != want {
			t.Errorf("position %d: etaSeconds %d, want %d", tt.pos, st.EtaSeconds, want)
		}
		lo, hi := int64(tt.retryBase*0.9)-1, int64(tt.retryBase*1.1)+1
		if st.RetryAfterMs < lo || st.RetryAfterMs > hi || st.RetryAfterMs > 10_000 {
			t.Errorf("position %d: retryAfterMs %d, want %d..%d (cap 10000)", tt.pos, st.RetryAfterMs, lo, hi)
		}
		if tt.pos >= 200 && st.RetryAfterMs <= prev {
			t.Errorf("position %d: retryAfterMs %d did not rise above %d", tt.pos, st.RetryAfterMs, prev)
		}
		prev = st.RetryAfterMs
	}

	// Once the dispatcher measures a rate, the ETA follows it: 3000 / 25 = 120 s.
	h.rdb.HSet(ctx, redisstore.KeysFor(q).Dispatch(),
		redisstore.DispatchFieldMeasuredRate, "25", redisstore.DispatchFieldLastTickMs, time.Now().UnixMilli())
	_, st := h.position(q, userID(3000))
	if st.EtaSeconds != 120 || st.AdmissionRatePerSec != 25 {
		t.Fatalf("with a measured 25/s: etaSeconds %d rate %v, want 120 and 25", st.EtaSeconds, st.AdmissionRatePerSec)
	}
}

func TestLeaveMovesEveryoneBehindUpByOne(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	q := h.newQueue(nil)
	for i := 1; i <= 6; i++ {
		if r, _, err := h.enter(q, userID(i)); err != nil || r.status != http.StatusOK {
			t.Fatalf("enter %d: %v", i, err)
		}
	}
	leave := func(u string) int {
		return h.must(http.MethodDelete, "/api/v1/queues/"+q+"/position", h.token(u, ""), nil).status
	}
	if s := leave(userID(3)); s != http.StatusNoContent {
		t.Fatalf("leave: %d, want 204", s)
	}
	if s := leave(userID(3)); s != http.StatusNoContent {
		t.Fatalf("leave again: %d, want 204 (idempotent)", s)
	}
	for i, want := range map[int]int64{1: 1, 2: 2, 4: 3, 5: 4, 6: 5} {
		if _, st := h.position(q, userID(i)); st.Position != want || st.Total != 5 {
			t.Errorf("user %d: position %d of %d, want %d of 5", i, st.Position, st.Total, want)
		}
	}
	if _, st := h.position(q, userID(3)); st.State != "NOT_IN_QUEUE" {
		t.Fatalf("user who left: %s, want NOT_IN_QUEUE", st.State)
	}
	if z := h.zcard(q); z != 5 {
		t.Fatalf("ZCARD = %d, want 5", z)
	}
}
