package queue

import (
	"math"
	"math/rand/v2"
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
