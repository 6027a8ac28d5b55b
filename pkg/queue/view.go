package queue

import (
	"encoding/json"
	"math"
	"math/rand/v2"
	"strconv"
	"time"
)

// View is a Standing as the API shows it: the body of the gateway's enter
// and position calls and of the notification stream's position events.
type View struct {
	QueueID    string `json:"queueId"`
	State      string `json:"state"`
	QueueState string `json:"queueState"`
	Position   int64  `json:"position"`
	Ahead      int64  `json:"ahead"`
	Total      int64  `json:"total"`
	// PresentOnly says that Position, Ahead, Total and the wait count only
	// the people present (a queue with presence on: the away are out of
	// the line until they come back).
	PresentOnly bool `json:"presentOnly,omitempty"`
	// EtaSeconds is the estimated wait, rounded up; 0 unless waiting. It
	// expects the measured share of leavers among the people ahead
	// (LeaveShare) not to be there.
	EtaSeconds int64 `json:"etaSeconds"`
	// EtaLowSeconds and EtaHighSeconds bound an 80 % interval around it
	// (rounded down and up): what a page shows ("about 4-6 minutes").
	EtaLowSeconds  int64 `json:"etaLowSeconds"`
	EtaHighSeconds int64 `json:"etaHighSeconds"`
	// RetryAfterMs is when to ask again; it grows with the position.
	RetryAfterMs int64 `json:"retryAfterMs"`
	// AdmissionRatePerSec is the rate the estimate used (measured if known).
	AdmissionRatePerSec float64 `json:"admissionRatePerSec"`

	// StartsAt is the queue's start time (RFC 3339), when it has one.
	// StartsInMs is the time left until it by the server's clock, for a
	// countdown that does not trust the device's clock; PreQueued is how
	// many wait for the start. A PRE_QUEUE person learns their drawn place
	// at the start.
	StartsAt   string `json:"startsAt,omitempty"`
	StartsInMs int64  `json:"startsInMs,omitempty"`
	PreQueued  int64  `json:"preQueued,omitempty"`

	// Ticket is the holder's queue ticket: polls that send it back
	// (X-Queue-Ticket, or ?ticket= on the event stream) are answered
	// from the replicas' admission frontier while the place is far from
	// the front. Only ever in the answer to its holder.
	Ticket string `json:"ticket,omitempty"`

	Token           string `json:"token,omitempty"`
	TokenID         string `json:"tokenId,omitempty"`
	ActivateAt      string `json:"activateAt,omitempty"`
	ExpiresAt       string `json:"expiresAt,omitempty"`
	OrderInProgress bool   `json:"orderInProgress,omitempty"`
}

// NewView renders s, with a jittered polling hint, which it also returns.
// withSecret controls whether the token secret is included: only the
// gateway's answer to the token's own holder carries it.
func NewView(s Standing, withSecret bool) (View, time.Duration) {
	retry := s.pollHint(rand.Float64())
	v := View{
		QueueID:             s.QueueID,
		State:               string(s.State),
		QueueState:          string(s.QueueState),
		Position:            s.Position,
		Ahead:               s.Ahead(),
		Total:               s.Total,
		RetryAfterMs:        retry.Milliseconds(),
		AdmissionRatePerSec: math.Round(s.Rate()*100) / 100,
		OrderInProgress:     s.Ordering,
		PresentOnly:         s.MaxPoll > 0 && (s.State == Waiting || s.State == PreQueue),
	}
	if s.State == Waiting {
		v.EtaSeconds = int64(math.Ceil(s.ETA().Seconds()))
		low, high := s.ETARange()
		v.EtaLowSeconds, v.EtaHighSeconds = int64(math.Floor(low.Seconds())), int64(math.Ceil(high.Seconds()))
	}
	if !s.StartsAt.IsZero() {
		v.StartsAt = s.StartsAt.UTC().Format(time.RFC3339Nano)
		v.StartsInMs = s.StartsIn.Milliseconds()
		v.PreQueued = s.PreQueued
	}
	if withSecret {
		v.Ticket = s.Ticket
	}
	if t := s.Token; t != nil {
		if withSecret {
			v.Token = t.Secret
		}
		v.TokenID = t.ID
		v.ActivateAt = t.ActivateAt.Format(time.RFC3339Nano)
		v.ExpiresAt = t.ExpiresAt.Format(time.RFC3339Nano)
	}
	return v, retry
}

// AppendJSON appends v as encoding/json would marshal it (the same bytes:
// the same fields in the same order, omitempty, floats and escaping), a
// few times faster and without reflection: every poll and every stream's
// position event is one. FuzzViewJSON holds it to json.Marshal.
func (v View) AppendJSON(b []byte) []byte {
	b = append(b, `{"queueId":`...)
	b = appendJSONString(b, v.QueueID)
	b = append(b, `,"state":`...)
	b = appendJSONString(b, v.State)
	b = append(b, `,"queueState":`...)
	b = appendJSONString(b, v.QueueState)
	b = appendJSONInt(b, `,"position":`, v.Position)
	b = appendJSONInt(b, `,"ahead":`, v.Ahead)
	b = appendJSONInt(b, `,"total":`, v.Total)
	b = appendJSONInt(b, `,"etaSeconds":`, v.EtaSeconds)
	b = appendJSONInt(b, `,"etaLowSeconds":`, v.EtaLowSeconds)
	b = appendJSONInt(b, `,"etaHighSeconds":`, v.EtaHighSeconds)
	b = appendJSONInt(b, `,"retryAfterMs":`, v.RetryAfterMs)
	b = append(b, `,"admissionRatePerSec":`...)
	b = appendJSONFloat(b, v.AdmissionRatePerSec)
	if v.StartsAt != "" {
		b = append(b, `,"startsAt":`...)
		b = appendJSONString(b, v.StartsAt)
	}
	if v.StartsInMs != 0 {
		b = appendJSONInt(b, `,"startsInMs":`, v.StartsInMs)
	}
	if v.PreQueued != 0 {
		b = appendJSONInt(b, `,"preQueued":`, v.PreQueued)
	}
	for _, f := range [...]struct {
		name, value string
	}{{"ticket", v.Ticket}, {"token", v.Token}, {"tokenId", v.TokenID}, {"activateAt", v.ActivateAt}, {"expiresAt", v.ExpiresAt}} {
		if f.value != "" {
			b = append(b, `,"`+f.name+`":`...)
			b = appendJSONString(b, f.value)
		}
	}
	if v.OrderInProgress {
		b = append(b, `,"orderInProgress":true`...)
	}
	return append(b, '}')
}

func appendJSONInt(b []byte, key string, n int64) []byte {
	return strconv.AppendInt(append(b, key...), n, 10)
}

// appendJSONFloat formats f as encoding/json does.
func appendJSONFloat(b []byte, f float64) []byte {
	if math.IsInf(f, 0) || math.IsNaN(f) {
		return append(b, '0') // json.Marshal fails on these; a view never has one
	}
	format := byte('f')
	if abs := math.Abs(f); abs != 0 && (abs < 1e-6 || abs >= 1e21) {
		format = 'e'
	}
	b = strconv.AppendFloat(b, f, format, -1, 64)
	if format == 'e' {
		// clean up e-09 to e-9, as encoding/json does
		if n := len(b); n >= 4 && b[n-4] == 'e' && b[n-3] == '-' && b[n-2] == '0' {
			b[n-2] = b[n-1]
			b = b[:n-1]
		}
	}
	return b
}

// appendJSONString quotes s. Ids, states, times, tickets and token secrets
// are printable ASCII with nothing to escape; anything else goes through
// encoding/json, so the escaping is always its own.
func appendJSONString(b []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c > 0x7e || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			q, _ := json.Marshal(s)
			return append(b, q...)
		}
	}
	b = append(b, '"')
	b = append(b, s...)
	return append(b, '"')
}
