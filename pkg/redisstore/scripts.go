package redisstore

import (
	"context"
	"embed"
	"fmt"

	"github.com/redis/go-redis/v9"
)

//go:embed lua/*.lua
var luaFS embed.FS

// script is a Lua script with the shared prelude prepended. go-redis runs it
// by EVALSHA and falls back to EVAL on NOSCRIPT (after a Redis restart or a
// failover to a node that never saw it).
func script(name string) *redis.Script {
	prelude, err := luaFS.ReadFile("lua/prelude.lua")
	if err != nil {
		panic(err) // embedded at build time: cannot fail at run time
	}
	body, err := luaFS.ReadFile("lua/" + name + ".lua")
	if err != nil {
		panic(fmt.Sprintf("redisstore: no script %q", name))
	}
	return redis.NewScript(string(prelude) + "\n" + string(body))
}

var (
	enterScript    = script("enter")
	positionScript = script("position")
	leaveScript    = script("leave")
	statsScript    = script("stats")
	closeScript    = script("close")
	leaseScript    = script("lease")
	issueScript    = script("issue")
	consumeScript  = script("consume")
	checkScript    = script("check")
	settleScript   = script("settle")
	restoreScript  = script("restore")
	overdueScript  = script("overdue")
	groupScript    = script("outbox_group")
	ackScript      = script("outbox_ack")
	drawScript     = script("draw")
	frontierScript = script("frontier")
	touchScript    = script("touch")
	presenceScript = script("presence")
	textsScript    = script("texts")
	pushScript     = script("push")
	refusedScript  = script("refused")
)

// DispatcherScripts are the scripts the admission-dispatcher runs.
var DispatcherScripts = []*redis.Script{leaseScript, issueScript, restoreScript, settleScript, groupScript, ackScript, drawScript, touchScript}

// OrderScripts are the scripts the order-service runs.
var OrderScripts = []*redis.Script{checkScript, consumeScript, settleScript, restoreScript, overdueScript}

// GatewayScripts are the scripts the gateway runs.
var GatewayScripts = []*redis.Script{enterScript, positionScript, leaveScript, statsScript, closeScript, frontierScript, presenceScript, textsScript,
	refusedScript}

// NotificationScripts are the scripts the notification-service runs: it
// reads positions and frontiers, records the sightings of open event
// streams (presence) and keeps the Web Push subscriptions.
var NotificationScripts = []*redis.Script{positionScript, frontierScript, presenceScript, pushScript}

// LoadScripts loads scripts into the script cache of every node (every master
// of a cluster), so the first call of each is an EVALSHA.
func LoadScripts(ctx context.Context, c redis.UniversalClient, scripts ...*redis.Script) error {
	for _, s := range scripts {
		if err := s.Load(ctx, c).Err(); err != nil {
			return fmt.Errorf("redisstore: load script: %w", classify(err))
		}
	}
	return nil
}

// evalAll runs script once per call in one pipelined round (on a cluster,
// one round per node) and returns each call's command, and the round's error
// (the first failed command's, as go-redis reports it). It waits for no
// replica (see evalRounds).
func (s *Store) evalAll(ctx context.Context, script *redis.Script, n int, keys func(i int) []string, args func(i int) []any) ([]*redis.Cmd, error) {
	cmds, _, err := s.evalRounds(ctx, script, n, keys, args, false)
	return cmds, err
}
