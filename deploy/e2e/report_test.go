package e2e

import (
	"encoding/csv"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/waitingroom/waitingroom/pkg/testenv"
)

// TestTheSaleReportMatchesTheSale: a sale of 8 people through the
// services (the queue paused while they enter, one leaves, then 7 are
// admitted, 5 of them order and 2 let their 2-second tokens expire); once
// its minutes are over, the order-service's report over them counts
// exactly that: 8 arrivals, 1 leave, 7 admitted, 5 orders, 2 expired
// unused, nobody abandoned, a wait for everyone admitted; its CSV has a
// header and one row a minute adding up to the same. The report is an
// admin's: 403 for a user's token, 401 without one, 400 for a range that
// ends before it starts.
func TestTheSaleReportMatchesTheSale(t *testing.T) {
	t.Parallel()
	id := testenv.ID(t)
	s := newSystemWith(t, systemOptions{queues: []string{id}, id: id, orderEnv: map[string]string{"HISTORY_ROLLUP_INTERVAL": "1s"}})
	from := time.Now().UTC().Truncate(time.Minute)
	s.setup(10)
	queuePath := s.gateway.URL + "/admin/v1/queues/" + s.q
	if st, v := s.call(http.MethodPut, queuePath, "ops", "admin", "", map[string]any{"state": "PAUSED", "tokenTtlSeconds": 2}); st != http.StatusOK {
		t.Fatalf("pause: %d %v", st, v)
	}
	users := []string{"r0", "r1", "r2", "r3", "r4", "r5", "r6", "r7"}
	for _, u := range users {
		if st, v := s.call(http.MethodPost, s.gateway.URL+"/api/v1/queues/"+s.q+"/enter", u, "", "", nil); st != http.StatusOK || v["state"] != "WAITING" {
			t.Fatalf("enter %s: %d %v", u, st, v)
		}
	}
	if st, v := s.call(http.MethodDelete, s.gateway.URL+"/api/v1/queues/"+s.q+"/position", users[7], "", "", nil); st != http.StatusNoContent {
		t.Fatalf("leave: %d %v", st, v)
	}
	if st, v := s.call(http.MethodPut, queuePath, "ops", "admin", "", map[string]any{"state": "OPEN"}); st != http.StatusOK {
		t.Fatalf("resume: %d %v", st, v)
	}
	for i, u := range users[:7] {
		adm := s.waitAdmitted(u)
		if i >= 5 {
			continue // lets the token expire
		}
		if st, v := s.call(http.MethodPost, s.order.URL+"/api/v1/orders", u, "", adm["token"].(string),
			map[string]any{"queueId": s.q, "productId": "tee", "quantity": 1}); st != http.StatusCreated {
			t.Fatalf("order by %s: %d %v", u, st, v)
		}
	}
	deadline := time.Now().Add(20 * time.Second)
	for s.count("token.expired") < 2 && time.Now().Before(deadline) {
		time.Sleep(100 * time.Millisecond)
	}
	if n := s.count("token.expired"); n != 2 {
		t.Fatalf("%d TokenExpired, want 2", n)
	}

	// The report over the sale's minutes, once the last of them is over
	// and sent.
	to := time.Now().UTC().Truncate(time.Minute).Add(time.Minute)
	query := url.Values{"from": {from.Format(time.RFC3339)}, "to": {to.Format(time.RFC3339)}}
	reportURL := s.order.URL + "/admin/v1/queues/" + s.q + "/report?" + query.Encode()
	want := map[string]float64{"arrivals": 8, "left": 1, "admitted": 7, "ordersCreated": 5, "ordersFailed": 0, "expiredUnused": 2, "abandoned": 0}
	var totals map[string]any
	var body map[string]any
	settled := func() bool {
		for k, v := range want {
			if totals[k] != v {
				return false
			}
		}
		return true
	}
	deadline = to.Add(30 * time.Second)
	for {
		st, v := s.call(http.MethodGet, reportURL, "ops", "admin", "", nil)
		if st != http.StatusOK {
			t.Fatalf("report: %d %v", st, v)
		}
		totals, _ = v["totals"].(map[string]any)
		body = v
		if settled() || time.Now().After(deadline) {
			break
		}
		time.Sleep(time.Second)
	}
	if !settled() {
		t.Fatalf("report totals %v, want %v\ndispatcher log:\n%s", totals, want, s.dispatcher.Tail())
	}
	minutes, _ := body["minutes"].([]any)
	if wantRows := int(to.Sub(from) / time.Minute); len(minutes) != wantRows {
		t.Fatalf("%d minutes in the report from %s to %s, want %d", len(minutes), from, to, wantRows)
	}
	if p50, max := totals["waitP50Ms"].(float64), totals["waitMaxMs"].(float64); max <= 0 || p50 <= 0 || p50 > max*1.1 {
		t.Fatalf("waits p50 %v, max %v: want both above 0, p50 within the max", p50, max)
	}
	if c := totals["conversion"].(float64); c < 0.714 || c > 0.715 {
		t.Fatalf("conversion %v, want 5/7", c)
	}

	// The CSV: a header and a row a minute, adding up to the totals.
	req, _ := http.NewRequest(http.MethodGet, reportURL+"&format=csv", nil)
	tok, _ := s.ver.Mint("ops", "admin", time.Hour)
	req.Header.Set("Authorization", "Bearer "+tok)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	if ct := res.Header.Get("Content-Type"); res.StatusCode != http.StatusOK || !strings.HasPrefix(ct, "text/csv") {
		b, _ := io.ReadAll(res.Body)
		t.Fatalf("CSV: %d %s %s", res.StatusCode, ct, b)
	}
	rows, err := csv.NewReader(res.Body).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != len(minutes)+1 || strings.Join(rows[0], ",") != "minute,arrivals,admitted,ordersCreated,ordersFailed,expiredUnused,left,abandoned,waitP50Ms,waitP95Ms,waitMaxMs" {
		t.Fatalf("CSV of %d rows (header %v), want a header and %d", len(rows), rows[0], len(minutes))
	}
	sums := make([]int64, len(rows[0]))
	for _, r := range rows[1:] {
		if _, err := time.Parse(time.RFC3339, r[0]); err != nil {
			t.Fatalf("CSV minute %q: %v", r[0], err)
		}
		for i := 1; i <= 7; i++ {
			n, err := strconv.ParseInt(r[i], 10, 64)
			if err != nil {
				t.Fatalf("CSV %s %q", rows[0][i], r[i])
			}
			sums[i] += n
		}
	}
	if got := fmt.Sprint(sums[1:8]); got != "[8 7 5 0 2 1 0]" {
		t.Fatalf("CSV sums (arrivals, admitted, ordersCreated, ordersFailed, expiredUnused, left, abandoned) %s, want [8 7 5 0 2 1 0]", got)
	}

	// Only an admin's, and a range that makes sense.
	if st, _ := s.call(http.MethodGet, reportURL, "r0", "", "", nil); st != http.StatusForbidden {
		t.Fatalf("report with a user's token: %d, want 403", st)
	}
	if res, err := http.Get(reportURL); err != nil || res.StatusCode != http.StatusUnauthorized {
		t.Fatalf("report without a token: %v %v, want 401", res, err)
	} else {
		_ = res.Body.Close()
	}
	back := url.Values{"from": {to.Format(time.RFC3339)}, "to": {from.Format(time.RFC3339)}}
	if st, v := s.call(http.MethodGet, s.order.URL+"/admin/v1/queues/"+s.q+"/report?"+back.Encode(), "ops", "admin", "", nil); st != http.StatusBadRequest || v["type"] != "validation-failed" {
		t.Fatalf("report of a backward range: %d %v, want 400 validation-failed", st, v)
	}
}
