// Package problem writes RFC 9457 problem details (application/problem+json).
//
// The Type values are stable, short, relative URI references ("queue-full"):
// clients switch on them, so they never change once published.
package problem

import (
	"encoding/json"
	"net/http"
	"strconv"
	"time"
)

// ContentType is the media type of a problem document.
const ContentType = "application/problem+json"

// Stable problem types shared by the services.
const (
	TypeBadRequest         = "bad-request"
	TypeValidation         = "validation-failed"
	TypeBodyTooLarge       = "body-too-large"
	TypeUnauthorized       = "unauthorized"
	TypeForbidden          = "forbidden"
	TypeNotFound           = "not-found"
	TypeMethodNotAllowed   = "method-not-allowed"
	TypeRateLimited        = "rate-limited"
	TypeBackendUnavailable = "backend-unavailable"
	TypeInternal           = "internal-error"
	TypeUnsupportedMedia   = "unsupported-media-type"
	// TypeHeadersTooLarge (431): the request line and headers are over
	// 16 KiB; net/http closes the connection after it.
	TypeHeadersTooLarge = "headers-too-large"

	// The waiting line (queue-gateway, notification-service).
	TypeInvalidQueueID = "invalid-queue-id"
	TypeInvalidUserID  = "invalid-user-id"
	TypeQueueNotFound  = "queue-not-found"
	TypeQueueClosed    = "queue-closed"
	TypeQueueFull      = "queue-full"
	// TypeChallengeRequired (428): solve POST .../challenge, then enter
	// again with X-Enter-Challenge.
	TypeChallengeRequired = "challenge-required"
	// TypeChallengeFailed (403): the solution is wrong, expired, used, or
	// for a lower difficulty than the queue's current one.
	TypeChallengeFailed = "challenge-failed"
	// TypeChallengeNotRequired (409): the queue takes entrants without one.
	TypeChallengeNotRequired = "challenge-not-required"
	// TypeQueueStarted (409): the queue's start time has passed and its
	// pre-queue was drawn; startsAt can no longer change.
	TypeQueueStarted = "queue-started"
	// TypeShardsFixed (409): the queue's line count cannot change while
	// anyone is in it.
	TypeShardsFixed = "shards-fixed"
	// TypeTicketInvalid (403): the queue ticket was not issued to this
	// user for this queue (forged, altered, or someone else's).
	TypeTicketInvalid = "ticket-invalid"

	// The order path (order-service).
	TypeInvalidEntryToken = "invalid-entry-token"
	TypeTokenNotActive    = "token-not-active"
	TypeSoldOut           = "sold-out"
	// TypeOrderLimitReached (409): the person has the queue's
	// maxOrdersPerUser orders already; the entry token is spent.
	TypeOrderLimitReached     = "order-limit-reached"
	TypeProductNotFound       = "product-not-found"
	TypeOrderNotFound         = "order-not-found"
	TypeTokenAlreadyUsed      = "token-already-used"
	TypeIdempotencyInProgress = "idempotency-in-progress"

	// TypePreconditionFailed (412): an admin write named the version it
	// changes (If-Match) and the queue has changed since, or asked to
	// create (If-None-Match: *) a queue that exists. Nothing was written.
	TypePreconditionFailed = "precondition-failed"
)

// FieldError names one bad field of a request and what is wrong with it.
type FieldError struct {
	Field   string `json:"field"`
	Message string `json:"message"`
}

// Problem is an RFC 9457 problem document with the extension members we use.
type Problem struct {
	Type     string       `json:"type"`
	Title    string       `json:"title"`
	Status   int          `json:"status"`
	Detail   string       `json:"detail,omitempty"`
	Instance string       `json:"instance,omitempty"`
	Errors   []FieldError `json:"errors,omitempty"`
	// RetryAfter, when positive, is also sent as a Retry-After header (seconds,
	// rounded up) and as retryAfterMs in the body.
	RetryAfter   time.Duration `json:"-"`
	RetryAfterMs int64         `json:"retryAfterMs,omitempty"`
}

// New returns a problem with the given status, type and detail; the title is the
// status text.
func New(status int, typ, detail string) *Problem {
	return &Problem{Type: typ, Title: http.StatusText(status), Status: status, Detail: detail}
}

// WithRetryAfter sets the Retry-After hint.
func (p *Problem) WithRetryAfter(d time.Duration) *Problem {
	p.RetryAfter = d
	return p
}

// WithErrors attaches field errors.
func (p *Problem) WithErrors(errs []FieldError) *Problem {
	p.Errors = errs
	return p
}

// Error lets a Problem travel as an error.
func (p *Problem) Error() string { return p.Type + ": " + p.Detail }

// Write sends p as the response, with Retry-After when set.
func Write(w http.ResponseWriter, r *http.Request, p *Problem) {
	if p.Instance == "" && r != nil {
		p.Instance = r.URL.Path
	}
	if p.RetryAfter > 0 {
		w.Header().Set("Retry-After", RetryAfterSeconds(p.RetryAfter))
		p.RetryAfterMs = p.RetryAfter.Milliseconds()
	}
	w.Header().Set("Content-Type", ContentType)
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(p.Status)
	_ = json.NewEncoder(w).Encode(p)
}

// RetryAfterSeconds formats d as a Retry-After delta-seconds value, rounded up
// and at least 1.
func RetryAfterSeconds(d time.Duration) string {
	s := int64(d / time.Second)
	if d%time.Second > 0 {
		s++ // rounded up, without overflowing near the largest duration
	}
	if s < 1 {
		s = 1
	}
	return strconv.FormatInt(s, 10)
}
