package queue

import (
	"encoding/json"
	"testing"
	"time"
)

// TestViewAppendJSONIsJSONMarshal: for the standings a view is made of
// (every state, with and without a token, a start time, an order in
// progress), AppendJSON writes exactly what json.Marshal writes.
func TestViewAppendJSONIsJSONMarshal(t *testing.T) {
	at := time.Date(2026, 11, 30, 23, 59, 59, 123456789, time.UTC)
	tok := &Token{Secret: "s3cr3t-0123456789abcdef", ID: "tid-42", ActivateAt: at, ExpiresAt: at.Add(5 * time.Minute)}
	cases := []Standing{
		{},
		{QueueID: "sale", State: Waiting, QueueState: Open, Position: 5000, Total: 100000, ConfiguredRate: 175, MeasuredRate: 174.93, LeaveShare: 0.1, Ticket: "AQAAAZrW8f0AAAAAAAAAE4g.3sY0cVmJ2P9mQ3pK0wQ1xg"},
		{QueueID: "sale", State: Admitted, QueueState: Open, Total: 3, ConfiguredRate: 0.5, Token: tok},
		{QueueID: "sale", State: Admitted, QueueState: Paused, Token: tok, Ordering: true, ConfiguredRate: 1e-7},
		{QueueID: "drop", State: PreQueue, QueueState: Open, StartsAt: at, StartsIn: 90 * time.Second, PreQueued: 12345, ConfiguredRate: 2.5e21},
		{QueueID: "q", State: Bypass, QueueState: Open, ConfiguredRate: 33.333333},
		{QueueID: "x<y>&\"z\"\u2028\x01é", State: UserState("ODD\tSTATE"), QueueState: Closed, Position: -1},
	}
	for i, st := range cases {
		for _, secret := range []bool{true, false} {
			v, _ := NewView(st, secret)
			want, err := json.Marshal(v)
			if err != nil {
				t.Fatal(err)
			}
			if got := v.AppendJSON(nil); string(got) != string(want) {
				t.Errorf("case %d (secret %v):\n got %s\nwant %s", i, secret, got, want)
			}
		}
	}
}

// FuzzViewJSON: any view, AppendJSON = json.Marshal.
func FuzzViewJSON(f *testing.F) {
	f.Add("sale", "WAITING", "OPEN", int64(5), int64(100), 175.0, "", "tk.x", "", false)
	f.Add("a<b", "ADMITTED", "PAUSED", int64(-1), int64(0), 1e-9, "2026-11-30T23:59:59Z", "", "sec\"ret", true)
	f.Fuzz(func(t *testing.T, q, state, qstate string, pos, total int64, rate float64, starts, tk, secret string, ordering bool) {
		v := View{QueueID: q, State: state, QueueState: qstate, Position: pos, Ahead: pos - 1, Total: total, EtaSeconds: total,
			EtaLowSeconds: pos, EtaHighSeconds: total, RetryAfterMs: pos * 7, AdmissionRatePerSec: rate, StartsAt: starts,
			StartsInMs: total / 3, PreQueued: pos / 2, Ticket: tk, Token: secret, TokenID: tk, ActivateAt: starts, ExpiresAt: secret,
			OrderInProgress: ordering}
		want, err := json.Marshal(v)
		if err != nil {
			return // NaN or Inf: no view has one
		}
		if got := v.AppendJSON(nil); string(got) != string(want) {
			t.Fatalf("\n got %s\nwant %s", got, want)
		}
	})
}
