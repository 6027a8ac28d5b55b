package e2e

import (
	"bytes"
	"encoding/json"
	"net/http"
	"sort"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/waitingroom/waitingroom/pkg/events/waitingroomv1"
)

// TestEveryQueueChangeIsPublishedWithItsOperator: an operator creates a
// queue, pauses it, resumes it and closes it through the gateway's admin API; a
// change for a stale version (412) and a bad one (400) are refused. The
// dispatcher's relay publishes exactly six QueueChanged events, in
// order: the four changes, each naming the operator, the knobs before
// and after, and the ETag the admin API answered for that version, and
// the two refusals with the change asked for and why; the order-service's
// audit trail lists the same six, newest first, to an admin and to
// nobody else (403 for a user's token, 401 without one).
func TestEveryQueueChangeIsPublishedWithItsOperator(t *testing.T) {
	t.Parallel()
	s := newSystem(t, false)
	path := s.gateway.URL + "/admin/v1/queues/" + s.q
	type answer struct {
		status int
		etag   string
	}
	put := func(user string, knobs map[string]any, ifMatch string) answer {
		t.Helper()
		tok, err := s.ver.Mint(user, "admin", time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := json.Marshal(knobs)
		req, _ := http.NewRequest(http.MethodPut, path, bytes.NewReader(b))
		req.Header.Set("Authorization", "Bearer "+tok)
		req.Header.Set("Content-Type", "application/json")
		if ifMatch != "" {
			req.Header.Set("If-Match", ifMatch)
		}
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_ = res.Body.Close()
		// Changes are stamped to the millisecond: the next one in another.
		time.Sleep(5 * time.Millisecond)
		return answer{res.StatusCode, res.Header.Get("ETag")}
	}
	created := put("ann@ops", map[string]any{"admissionRatePerSec": 5}, "")
	paused := put("ann@ops", map[string]any{"state": "PAUSED"}, created.etag)
	stale := put("bob@ops", map[string]any{"state": "CLOSED"}, created.etag)
	bad := put("bob@ops", map[string]any{"admissionRatePerSec": -1}, "")
	resumed := put("bob@ops", map[string]any{"state": "OPEN"}, paused.etag)
	if st, v := s.call(http.MethodDelete, path, "carol@ops", "admin", "", nil); st != http.StatusNoContent {
		t.Fatalf("close: %d %v", st, v)
	}
	if created.status != 201 || paused.status != 200 || stale.status != 412 || bad.status != 400 || resumed.status != 200 {
		t.Fatalf("statuses: create %d, pause %d, stale %d, bad %d, resume %d; want 201 200 412 400 200",
			created.status, paused.status, stale.status, bad.status, resumed.status)
	}

	deadline := time.Now().Add(20 * time.Second)
	for s.count("queue.changed") < 6 && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	time.Sleep(time.Second) // a seventh would come now
	var got []*waitingroomv1.QueueChanged
	seen := map[string]bool{}
	for _, d := range s.events.Keyed("queue.changed") {
		var m waitingroomv1.QueueChanged
		if err := proto.Unmarshal(d.Body, &m); err != nil {
			t.Fatal(err)
		}
		if m.GetQueueId() == s.q && !seen[m.GetEventId()] {
			seen[m.GetEventId()] = true
			got = append(got, &m)
		}
	}
	if len(got) != 6 {
		t.Fatalf("%d QueueChanged events for the queue, want 6 (create, pause, two refusals, resume, close)", len(got))
	}
	sort.SliceStable(got, func(i, j int) bool { return got[i].GetOccurredAt().AsTime().Before(got[j].GetOccurredAt().AsTime()) })
	state := func(js string) string {
		var v struct {
			State string `json:"state"`
		}
		if js == "" {
			return ""
		}
		if err := json.Unmarshal([]byte(js), &v); err != nil {
			t.Fatalf("knobs %q: %v", js, err)
		}
		return v.State
	}
	applied, refused := waitingroomv1.QueueChangeOutcome_QUEUE_CHANGE_OUTCOME_APPLIED, waitingroomv1.QueueChangeOutcome_QUEUE_CHANGE_OUTCOME_REFUSED
	configured := waitingroomv1.QueueChangeAction_QUEUE_CHANGE_ACTION_CONFIGURED
	want := []struct {
		user, before, after, etag, refusal string
		action                             waitingroomv1.QueueChangeAction
		outcome                            waitingroomv1.QueueChangeOutcome
	}{
		{"ann@ops", "", "OPEN", created.etag, "", waitingroomv1.QueueChangeAction_QUEUE_CHANGE_ACTION_CREATED, applied},
		{"ann@ops", "OPEN", "PAUSED", paused.etag, "", configured, applied},
		{"bob@ops", "", "CLOSED", "", "precondition-failed", configured, refused},
		{"bob@ops", "", "", "", "validation-failed", configured, refused},
		{"bob@ops", "PAUSED", "OPEN", resumed.etag, "", configured, applied},
		{"carol@ops", "OPEN", "CLOSED", "", "", waitingroomv1.QueueChangeAction_QUEUE_CHANGE_ACTION_CLOSED, applied},
	}
	for i, w := range want {
		m := got[i]
		if m.GetUserId() != w.user || state(m.GetBeforeJson()) != w.before || state(m.GetAfterJson()) != w.after ||
			m.GetEtag() != w.etag || m.GetAction() != w.action || m.GetOutcome() != w.outcome || m.GetRefusal() != w.refusal ||
			m.GetClientAddress() == "" {
			t.Errorf("change %d: %v; want by %s, %q -> %q, ETag %s, %v %v %s", i, m, w.user, w.before, w.after, w.etag, w.action, w.outcome, w.refusal)
		}
	}

	// The audit trail, from the order-service.
	auditURL := s.order.URL + "/admin/v1/audit?queueId=" + s.q
	var trail []any
	for deadline := time.Now().Add(20 * time.Second); len(trail) < 6 && time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		st, v := s.call(http.MethodGet, auditURL, "carol@ops", "admin", "", nil)
		if st != http.StatusOK {
			t.Fatalf("audit trail: %d %v", st, v)
		}
		trail, _ = v["changes"].([]any)
	}
	if len(trail) != 6 {
		t.Fatalf("audit trail: %d changes, want 6", len(trail))
	}
	for i, c := range trail {
		row := c.(map[string]any)
		w := want[len(want)-1-i] // newest first
		after, _ := json.Marshal(row["after"])
		outcome := strings.TrimPrefix(w.outcome.String(), "QUEUE_CHANGE_OUTCOME_")
		refusal, _ := row["refusal"].(string)
		if row["actor"] != w.user || row["etag"] != w.etag || state(string(after)) != w.after || row["eventId"] != got[len(got)-1-i].GetEventId() ||
			row["outcome"] != outcome || refusal != w.refusal {
			t.Errorf("audit row %d: %v; want by %s, state %s, ETag %s, %s %s", i, row, w.user, w.after, w.etag, outcome, w.refusal)
		}
	}
	if row := trail[5].(map[string]any); row["before"] != nil || row["action"] != "CREATED" {
		t.Errorf("the create's row: before %v, action %v; want null and CREATED", row["before"], row["action"])
	}
	if st, _ := s.call(http.MethodGet, auditURL, "mallory", "", "", nil); st != http.StatusForbidden {
		t.Errorf("audit trail with a user's token: %d, want 403", st)
	}
	if st, _ := s.call(http.MethodGet, auditURL, "", "", "", nil); st != http.StatusUnauthorized {
		t.Errorf("audit trail without a token: %d, want 401", st)
	}
}
