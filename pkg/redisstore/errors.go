package redisstore

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/redis/go-redis/v9"

	"github.com/waitingroom/waitingroom/pkg/queue"
)

// classify turns a go-redis error into a domain error: anything that means
// "Redis is not answering right now" becomes queue.ErrUnavailable, so the
// HTTP edge answers 503 with Retry-After. A Redis error reply that is not
// transient (a script bug, WRONGTYPE) stays an internal error.
func classify(err error) error {
	if err == nil || errors.Is(err, context.Canceled) || errors.Is(err, queue.ErrUnavailable) {
		return err
	}
	if errors.Is(err, redis.ErrPoolTimeout) {
		// No connection was free: the request was never sent. This
		// process is overloaded; Redis may be fine.
		return fmt.Errorf("%w: %v", queue.ErrOverloaded, err)
	}
	if strings.Contains(err.Error(), sentinelsUnreachable) {
		// No sentinel would say who the primary is, whatever each one
		// answered (a refused login, a timeout): Redis is out of reach.
		return fmt.Errorf("%w: %v", queue.ErrUnavailable, err)
	}
	var rerr redis.Error
	if errors.As(err, &rerr) && !transient(rerr.Error()) {
		return err
	}
	return fmt.Errorf("%w: %v", queue.ErrUnavailable, err)
}

// sentinelsUnreachable is go-redis's error when it asked every sentinel
// for the primary and none answered (it wraps each one's error).
const sentinelsUnreachable = "all sentinels specified in configuration are unreachable"

// transient reply prefixes: the server is loading, failing over, busy or
// refusing writes for now, or refusing us (a login turned off or a
// password rotated: the service cannot use Redis until that is put right,
// which is an outage to its callers, not their fault); the request can
// succeed later.
var transientPrefixes = []string{"LOADING", "BUSY", "CLUSTERDOWN", "TRYAGAIN", "MASTERDOWN", "READONLY", "MOVED", "ASK", "NOREPLICAS", "OOM",
	"WRONGPASS", "NOAUTH", "NOPERM"}

// transientInScript: what a script hits when its slot moves or the cluster
// is down under it. The scripts read every key before their first write,
// so such a failure changed nothing and the call can be made again.
var transientInScript = []string{
	"attempted to access a non local key",
	"undeclared keys were accessed during rehashing",
	"attempted to access a slot not served",
	"while the cluster is down",
}

func transient(msg string) bool {
	for _, p := range transientPrefixes {
		if strings.HasPrefix(msg, p) {
			return true
		}
	}
	for _, p := range transientInScript {
		if strings.Contains(msg, p) {
			return true
		}
	}
	return false
}
