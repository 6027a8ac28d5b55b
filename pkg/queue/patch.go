package queue

import (
	"bytes"
	"encoding/json"
	"sort"
	"time"
)

// Patch is a partial Config: nil fields keep their current value.
type Patch struct {
	State               *State
	AdmissionRatePerSec *float64
	MaxActive           *int64
	MaxQueueSize        *int64
	MaxWaitSeconds      *int64
	TokenTTLSeconds     *int64
	ActivationSpreadMs  *int64
	EnterChallenge      *EnterChallenge
	PowDifficultyBits   *int64
	MaxOrdersPerUser    *int64
	// StartsAt sets the start time; a zero time removes it (the sale
	// starts now: the pre-queue is drawn at once).
	StartsAt *time.Time

	AdmissionMode          *AdmissionMode
	MinAdmissionRatePerSec *float64
	MaxAdmissionRatePerSec *float64
	TargetOrderLatencyMs   *int64
	FailMode               *FailMode
	Shards                 *int64
	AwayAfterSeconds       *int64
	// AwayGraceSeconds unset follows AwayAfterSeconds while the two are
	// equal (see Config.AwayGraceSeconds).
	AwayGraceSeconds *int64
}

// Apply returns c with the patch's fields set.
func (p Patch) Apply(c Config) Config {
	if p.State != nil {
		c.State = *p.State
	}
	if p.AdmissionRatePerSec != nil {
		c.AdmissionRatePerSec = *p.AdmissionRatePerSec
	}
	setInt(&c.MaxActive, p.MaxActive)
	setInt(&c.MaxQueueSize, p.MaxQueueSize)
	setInt(&c.MaxWaitSeconds, p.MaxWaitSeconds)
	setInt(&c.TokenTTLSeconds, p.TokenTTLSeconds)
	setInt(&c.ActivationSpreadMs, p.ActivationSpreadMs)
	if p.EnterChallenge != nil {
		c.EnterChallenge = *p.EnterChallenge
	}
	setInt(&c.PowDifficultyBits, p.PowDifficultyBits)
	setInt(&c.MaxOrdersPerUser, p.MaxOrdersPerUser)
	if p.StartsAt != nil {
		c.StartsAt = *p.StartsAt
	}
	if p.AdmissionMode != nil {
		c.AdmissionMode = *p.AdmissionMode
	}
	setFloat(&c.MinAdmissionRatePerSec, p.MinAdmissionRatePerSec)
	setFloat(&c.MaxAdmissionRatePerSec, p.MaxAdmissionRatePerSec)
	setInt(&c.TargetOrderLatencyMs, p.TargetOrderLatencyMs)
	if p.FailMode != nil {
		c.FailMode = *p.FailMode
	}
	if p.Shards != nil {
		c.Shards = int(min(max(*p.Shards, -1), MaxShards+1)) // out of range stays out of range for Validate
	}
	if p.AwayAfterSeconds != nil {
		if p.AwayGraceSeconds == nil && c.AwayGraceSeconds == c.AwayAfterSeconds {
			c.AwayGraceSeconds = *p.AwayAfterSeconds
		}
		c.AwayAfterSeconds = *p.AwayAfterSeconds
	}
	setInt(&c.AwayGraceSeconds, p.AwayGraceSeconds)
	return c
}

func setFloat(dst *float64, v *float64) {
	if v != nil {
		*dst = *v
	}
}

func setInt(dst *int64, v *int64) {
	if v != nil {
		*dst = *v
	}
}

// DecodePatch parses a JSON object of knobs strictly and reports every bad
// field at once: unknown names, nulls and wrong types. Range checks happen on
// the merged Config (Validate), since some depend on other fields.
func DecodePatch(data []byte) (Patch, []FieldError) {
	var p Patch
	if len(bytes.TrimSpace(data)) == 0 {
		return p, []FieldError{{Field: "", Message: "request body must be a JSON object"}}
	}
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(data, &raw); err != nil {
		return p, []FieldError{{Field: "", Message: "request body must be a JSON object: " + err.Error()}}
	}
	if raw == nil {
		return p, []FieldError{{Field: "", Message: "request body must be a JSON object"}}
	}
	names := make([]string, 0, len(raw))
	for k := range raw {
		names = append(names, k)
	}
	sort.Strings(names)

	var errs []FieldError
	for _, name := range names {
		v := raw[name]
		var msg string
		if name == "startsAt" {
			p.StartsAt, msg = decodeTime(v)
			if msg != "" {
				errs = append(errs, FieldError{Field: name, Message: msg})
			}
			continue
		}
		if bytes.Equal(bytes.TrimSpace(v), []byte("null")) {
			errs = append(errs, FieldError{Field: name, Message: "must not be null"})
			continue
		}
		switch name {
		case "state":
			var s string
			if json.Unmarshal(v, &s) != nil {
				msg = "must be a string: OPEN, PAUSED or CLOSED"
			} else if st := State(s); !st.Valid() {
				msg = "must be OPEN, PAUSED or CLOSED"
			} else {
				p.State = &st
			}
		case "admissionRatePerSec":
			p.AdmissionRatePerSec, msg = decodeFloat(v)
		case "minAdmissionRatePerSec":
			p.MinAdmissionRatePerSec, msg = decodeFloat(v)
		case "maxAdmissionRatePerSec":
			p.MaxAdmissionRatePerSec, msg = decodeFloat(v)
		case "targetOrderLatencyMs":
			p.TargetOrderLatencyMs, msg = decodeInt(v)
		case "failMode":
			var s string
			if json.Unmarshal(v, &s) != nil {
				msg = "must be a string: CLOSED or OPEN"
			} else if m := FailMode(s); !m.Valid() {
				msg = "must be CLOSED or OPEN"
			} else {
				p.FailMode = &m
			}
		case "admissionMode":
			var s string
			if json.Unmarshal(v, &s) != nil {
				msg = "must be a string: FIXED or ADAPTIVE"
			} else if m := AdmissionMode(s); !m.Valid() {
				msg = "must be FIXED or ADAPTIVE"
			} else {
				p.AdmissionMode = &m
			}
		case "maxActive":
			p.MaxActive, msg = decodeInt(v)
		case "maxQueueSize":
			p.MaxQueueSize, msg = decodeInt(v)
		case "maxWaitSeconds":
			p.MaxWaitSeconds, msg = decodeInt(v)
		case "tokenTtlSeconds":
			p.TokenTTLSeconds, msg = decodeInt(v)
		case "activationSpreadMs":
			p.ActivationSpreadMs, msg = decodeInt(v)
		case "enterChallenge":
			var s string
			if json.Unmarshal(v, &s) != nil {
				msg = "must be a string: NONE or PROOF_OF_WORK"
			} else if ch := EnterChallenge(s); !ch.Valid() {
				msg = "must be NONE or PROOF_OF_WORK"
			} else {
				p.EnterChallenge = &ch
			}
		case "powDifficultyBits":
			p.PowDifficultyBits, msg = decodeInt(v)
		case "maxOrdersPerUser":
			p.MaxOrdersPerUser, msg = decodeInt(v)
		case "shards":
			p.Shards, msg = decodeInt(v)
		case "awayAfterSeconds":
			p.AwayAfterSeconds, msg = decodeInt(v)
		case "awayGraceSeconds":
			p.AwayGraceSeconds, msg = decodeInt(v)
		default:
			msg = "unknown field"
		}
		if msg != "" {
			errs = append(errs, FieldError{Field: name, Message: msg})
		}
	}
	return p, errs
}

func decodeFloat(v json.RawMessage) (*float64, string) {
	var f float64
	if err := json.Unmarshal(v, &f); err != nil {
		return nil, "must be a number"
	}
	return &f, ""
}

func decodeInt(v json.RawMessage) (*int64, string) {
	var n int64
	if err := json.Unmarshal(v, &n); err != nil {
		return nil, "must be an integer"
	}
	return &n, ""
}

// decodeTime reads a start time: an RFC 3339 string, or null or "" to
// remove it (a zero time).
func decodeTime(v json.RawMessage) (*time.Time, string) {
	var zero time.Time
	if bytes.Equal(bytes.TrimSpace(v), []byte("null")) {
		return &zero, ""
	}
	var s string
	if err := json.Unmarshal(v, &s); err != nil {
		return nil, "must be an RFC 3339 time such as \"2026-12-01T10:00:00Z\", or null to remove it"
	}
	if s == "" {
		return &zero, ""
	}
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		return nil, "must be an RFC 3339 time such as \"2026-12-01T10:00:00Z\", or null to remove it"
	}
	// Milliseconds are what is stored.
	t = t.Truncate(time.Millisecond).UTC()
	return &t, ""
}
