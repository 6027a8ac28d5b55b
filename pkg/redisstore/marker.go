package redisstore

import (
	"strconv"
	"strings"
	"time"

	"github.com/waitingroom/waitingroom/pkg/queue"
)

// TokenMarker is the status marker of a user who holds a token, the token
// in it: "TOKEN_ISSUED:<tokenId>|<secret>|<activateAt ms>|<expiresAt ms>|<seq>",
// as issue.lua and restore.lua write it (token_marker in the prelude). One
// key and one SET a person at admission: a hash of the token beside the
// marker was two keys and three calls. The key lives until two minutes
// after the expiry; the token is good until the expiry.
func TokenMarker(tok queue.Token, seq int64) string {
	return StatusTokenIssued + ":" + tok.ID + "|" + tok.Secret + "|" +
		strconv.FormatInt(tok.ActivateAt.UnixMilli(), 10) + "|" +
		strconv.FormatInt(tok.ExpiresAt.UnixMilli(), 10) + "|" + strconv.FormatInt(seq, 10)
}

// ParseTokenMarker reads a marker TokenMarker wrote: the token and the place's
// sequence number; false for any other marker (another state, or a token
// marker of an earlier version, which names only the token id).
func ParseTokenMarker(m string) (queue.Token, int64, bool) {
	rest, ok := strings.CutPrefix(m, StatusTokenIssued+":")
	if !ok {
		return queue.Token{}, 0, false
	}
	f := strings.Split(rest, "|")
	if len(f) != 5 {
		return queue.Token{}, 0, false
	}
	activate, err1 := strconv.ParseInt(f[2], 10, 64)
	expires, err2 := strconv.ParseInt(f[3], 10, 64)
	seq, err3 := strconv.ParseInt(f[4], 10, 64)
	if err1 != nil || err2 != nil || err3 != nil {
		return queue.Token{}, 0, false
	}
	return queue.Token{ID: f[0], Secret: f[1], ActivateAt: time.UnixMilli(activate), ExpiresAt: time.UnixMilli(expires)}, seq, true
}
