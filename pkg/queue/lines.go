package queue

import (
	"errors"
	"math"
	"strconv"
	"strings"
)

// A queue's line can be split into sub-lines (the knob Shards), each in a
// hash slot of its own, so that one sale's enters and admissions spread over
// the masters of a Redis Cluster. Line 0 is the queue itself (its keys are
// the queue's, wr:{q}:...); line i > 0 has the same keys under the hash tag
// {q:i}, which no queue id can spell (ids have no ':').
//
// A person's line is a keyed hash of their user id (LineOf, linekey.go),
// so every replica of every service finds it without asking, and nobody
// without the queue's key can choose it. The tokens a line issues name the line
// ("<i>." before the secret and the token id, nothing for line 0), so the
// order path and restoration find it from the token alone.

// MaxShards is the most sub-lines a queue can have.
const MaxShards = 64

// ErrShardsFixed: the line count of a queue with people in it (waiting,
// pre-queued, holding a token or ordering, in any line) cannot change.
var ErrShardsFixed = errors.New("the line count of a queue with people in it is fixed")

// LineID is the id a line's keys carry in their hash tag: the queue id for
// line 0, "<q>:<i>" for line i.
func LineID(q string, line int) string {
	if line == 0 {
		return q
	}
	return q + ":" + strconv.Itoa(line)
}

// ParseLineID splits a line id into its queue id and line; ok is false for
// a malformed one.
func ParseLineID(id string) (q string, line int, ok bool) {
	q, n, found := strings.Cut(id, ":")
	if !found {
		return id, 0, ValidID(id)
	}
	i, err := strconv.Atoi(n)
	if err != nil || i <= 0 || i >= MaxShards || strconv.Itoa(i) != n || !ValidID(q) {
		return "", 0, false
	}
	return q, i, true
}

// LineShare is line i's part of a whole split over shards lines: the whole
// divided evenly, the remainder one each to the first lines, so the parts
// add up to the whole exactly (caps across a queue hold in total).
func LineShare(whole int64, line, shards int) int64 {
	if shards <= 1 {
		return whole
	}
	s := int64(shards)
	part := whole / s
	if int64(line) < whole%s {
		part++
	}
	return part
}

// TokenLine is the line a token's secret or id names: the number before
// the first '.', or 0 for a token without one.
func TokenLine(token string) int {
	n, _, found := strings.Cut(token, ".")
	if !found {
		return 0
	}
	i, err := strconv.Atoi(n)
	if err != nil || i <= 0 || i >= MaxShards {
		return 0
	}
	return i
}

// LineToken is a token's secret or id as line issues it.
func LineToken(line int, token string) string {
	if line == 0 {
		return token
	}
	return strconv.Itoa(line) + "." + token
}

// InQueue turns st, a standing read from a line of lineWaiting people, into
// the queue's of waiting people: the place (ScaleToQueue, for someone
// waiting), the queue's length, and its measured rate (the line is
// admitted at lineWaiting / waiting of the rate, so the queue's is the
// line's scaled by the same factor, and the wait is the line's own).
func (st Standing) InQueue(lineWaiting, waiting int64) Standing {
	if st.State == Waiting {
		st.Position = ScaleToQueue(st.Position, lineWaiting, waiting)
	}
	if lineWaiting > 0 && waiting > lineWaiting {
		st.MeasuredRate *= float64(waiting) / float64(lineWaiting)
	}
	st.Total = waiting
	return st
}

// ScaleToQueue turns a place in one line into a place in the whole queue.
// The lines are admitted in arrival order (ArrivalShares), and a keyed hash
// spreads every moment's arrivals over the lines evenly, so a line holds
// lineWaiting / waiting of the people ahead of any place and drains at that
// share of the rate: place p in it is reached when about p x waiting /
// lineWaiting people of the queue have been admitted.
func ScaleToQueue(place, lineWaiting, waiting int64) int64 {
	if lineWaiting <= 0 || waiting <= lineWaiting {
		return place
	}
	return max(1, min(waiting, int64(math.Round(float64(place)*float64(waiting)/float64(lineWaiting)))))
}
