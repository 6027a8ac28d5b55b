package queue

import "time"

// Presence timing (the knob AwayAfterSeconds; docs/DESIGN.md, "Presence").
const (
	// SightingsEvery is how often a replica sends the sightings it
	// batched (presence.Book): a poll reaches Redis at most this late.
	SightingsEvery = time.Second
	// PresenceStaleAfter: a line whose replicas sent no sightings for
	// this long is not swept (issue.lua's PRESENCE_STALE_MS): a gateway
	// cut off from Redis must not make its people away.
	PresenceStaleAfter = 3 * time.Second
)

// MaxPollFor is the longest poll interval a queue with presence on may
// suggest (0: presence off, no bound): a third of what awayAfterSeconds
// leaves after a batch's delay, so a person who follows the server is
// never away, even when one poll is lost and the next comes late. 5 s:
// 1.33 s; 10 s: 3 s; 60 s: 19.7 s.
func MaxPollFor(awayAfterSeconds int64) time.Duration {
	if awayAfterSeconds <= 0 {
		return 0
	}
	return max((time.Duration(awayAfterSeconds)*time.Second-SightingsEvery)/3, MinRetryAfter)
}
