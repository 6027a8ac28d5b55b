package redisstore

// QueuesKey is the set of known queue ids. It is the one key outside any
// queue's hash slot; no script touches it.
const QueuesKey = "wr:queues"

// Status marker values (wr:{q}:status:<user>). The marker outlives the token
// by two minutes so "not in the line, no token" can say why.
const (
	StatusTokenIssued = "TOKEN_ISSUED"
	StatusOrdering    = "ORDERING"
	StatusOrdered     = "ORDERED"
	StatusExpired     = "EXPIRED"
	// StatusAbandoned: away past the grace (presence), out of the line.
	StatusAbandoned = "ABANDONED"
)

// Fields of the token hash (wr:{q}:token:<user>) of a token issued by an
// earlier version, which the scripts still read for its lifetime (a rolling
// upgrade); tokens are issued into the status marker now (TokenMarker).
// Times are Unix milliseconds.
const (
	TokenFieldSecret     = "token"
	TokenFieldID         = "tokenId"
	TokenFieldActivateAt = "activateAt"
	TokenFieldExpiresAt  = "expiresAt"
)

// Fields of the dispatch hash (wr:{q}:dispatch) the gateway reads.
const (
	DispatchFieldEpoch        = "epoch"
	DispatchFieldIssuedTotal  = "issuedTotal"
	DispatchFieldMeasuredRate = "measuredRate"
	DispatchFieldLastTickMs   = "lastTickMs"
	// DispatchFieldLeftTotal counts the people who left the line (leave).
	DispatchFieldLeftTotal = "leftTotal"
	// DispatchFieldLeftResolved counts those of them who entered before the
	// last person admitted: with issuedTotal, the share of a resolved
	// cohort that left, which the wait estimates discount.
	DispatchFieldLeftResolved = "leftResolved"
)

// Keys names every key of one queue. Each carries the hash tag {queueId}, so a
// queue lives in one Redis Cluster slot and every script on it can run there.
type Keys struct{ prefix string }

// KeysFor returns the keys of queue q. q must be a valid queue id (no braces).
func KeysFor(q string) Keys { return Keys{prefix: "wr:{" + q + "}:"} }

// Config is the queue's knobs (hash).
func (k Keys) Config() string { return k.prefix + "config" }

// Waiting is the line (zset: user -> sequence number).
func (k Keys) Waiting() string { return k.prefix + "waiting" }

// Seq is the line's monotonic sequence (INCR, never a clock).
func (k Keys) Seq() string { return k.prefix + "seq" }

// Token is one user's entry token as an earlier version issued it (hash,
// TTL = token TTL): read, never written, so its tokens stay good through a
// rolling upgrade.
func (k Keys) Token(user string) string { return k.prefix + "token:" + user }

// Status is one user's status marker (string, TTL = token TTL + 2 min),
// which holds the token while it is issued (TokenMarker).
func (k Keys) Status(user string) string { return k.prefix + "status:" + user }

// Active is the slots held (zset: user -> expiry ms).
func (k Keys) Active() string { return k.prefix + "active" }

// Inflight is the consumed tokens whose order is unsettled (zset:
// "<token id>:<user>" -> lease deadline ms).
func (k Keys) Inflight() string { return k.prefix + "inflight" }

// Left holds the people who left the line and whose cohort is not resolved
// yet (zset, member "<seq>:<user>", score their place's sequence number):
// the admission of a later place resolves them into the dispatch hash's
// leftResolved.
func (k Keys) Left() string { return k.prefix + "left" }

// LeftBins counts the leavers in Left per bin of sequence numbers (hash,
// fields "f<seq/queue.FineBin>" and "c<seq/queue.CoarseBin>"), for the
// replicas' frontier caches.
func (k Keys) LeftBins() string { return k.prefix + "leftbins" }

// Traces keeps, for people whose enter was traced and sampled, the W3C
// traceparent of that enter (hash, field = user id), until their admission
// tick links its span to it (issue.lua) or they leave. Untraced enters
// write nothing here.
func (k Keys) Traces() string { return k.prefix + "traces" }

// Consumed keeps what a restore needs to put one user's consumed token back
// (string: tokenId|secret|activateAt|expiresAt|orderId|seq), with an expiry:
// a user has at most one order in flight per queue.
func (k Keys) Consumed(user string) string { return k.prefix + "consumed:" + user }

// Spent is the secret of the token a user last consumed in this queue
// (string), with the consumed data's expiry. The order path's cheap check
// reads it to tell its holder's retry from junk; settle and restore leave it.
func (k Keys) Spent(user string) string { return k.prefix + "spent:" + user }

// Entered is when each person waiting got their place (user -> Redis TIME
// in µs): the admission measures their wait from it (Minutes), and the
// leader of a queue split into lines admits across the lines in that
// order.
func (k Keys) Entered() string { return k.prefix + "entered" }

// Seen is, with presence on (the knob awayAfterSeconds), when each person
// waiting (or pre-queued) last showed a sign of life (zset: user -> Redis
// time in ms). A person missing from it is never away.
func (k Keys) Seen() string { return k.prefix + "seen" }

// Away holds the people out of the line for being away (zset: user -> their
// place's sequence number): a sighting puts them back at that place.
func (k Keys) Away() string { return k.prefix + "away" }

// Skipped holds the away people whose place admission passed (zset: user ->
// when, ms): removed as ABANDONED once awayGraceSeconds is over.
func (k Keys) Skipped() string { return k.prefix + "skipped" }

// Pow records that the enter challenge with this id was used (string,
// expiring with the challenge).
func (k Keys) Pow(challengeID string) string { return k.prefix + "pow:" + challengeID }

// PreQueue holds the people who entered before the queue's start time
// (zset: user -> Redis time of their entry, kept for the record; the draw
// ignores it).
func (k Keys) PreQueue() string { return k.prefix + "prequeue" }

// Draw is the queue's pre-queue draw (hash): state, seed and its SHA-256,
// the sequence numbers reserved for the pre-queue (base, count) and the
// last one given (next), when it started and was drawn.
func (k Keys) Draw() string { return k.prefix + "draw" }

// Texts is the queue's own wording of the waiting page (hash: language ->
// a JSON object of message key to message), set through the admin API.
func (k Keys) Texts() string { return k.prefix + "texts" }

func (k Keys) textsKeys() []string { return []string{k.Config(), k.Texts(), k.Outbox()} }

// Push is a user's Web Push subscriptions in the queue (hash: subscription
// id -> "<saved at, Unix ms>|<the subscription's JSON>"), a few devices at
// most; it expires PUSH_SUBSCRIPTION_TTL after the last one was saved, and
// once a "your turn" went out, when that token expires.
func (k Keys) Push(user string) string { return k.prefix + "push:" + user }

// Pushed marks a token whose "your turn" push was sent (string), until the
// token expires: a redelivered TokenIssued is not pushed twice.
func (k Keys) Pushed(tokenID string) string { return k.prefix + "pushed:" + tokenID }

func (k Keys) pushKeys(user string) []string { return []string{k.Config(), k.Push(user)} }

// Dispatch is the dispatcher's state: fencing epoch, credit, counters (hash).
func (k Keys) Dispatch() string { return k.prefix + "dispatch" }

// Lock is the dispatcher lease for this queue.
func (k Keys) Lock() string { return k.prefix + "lock" }

// Outbox is the stream of events written with the state change.
func (k Keys) Outbox() string { return k.prefix + "outbox" }

// Minutes is the line's history of the minutes not yet sent (hash:
// "<minute>:<figure>" -> count; see lua/prelude.lua, minute_add): the
// admission tick sends each finished minute as a QueueMinute event.
func (k Keys) Minutes() string { return k.prefix + "minutes" }

// Key lists per script, in the order the scripts read KEYS. Tests check that
// each list hashes to one cluster slot.

func (k Keys) enterKeys(user, challengeID string) []string {
	return []string{k.Config(), k.Waiting(), k.Seq(), k.Token(user), k.Status(user), k.Dispatch(), k.Pow(challengeID), k.PreQueue(), k.Draw(),
		k.Traces(), k.Entered()}
}

func (k Keys) positionKeys(user string) []string {
	return []string{k.Config(), k.Waiting(), k.Token(user), k.Status(user), k.Dispatch(), k.PreQueue(), k.Draw()}
}

func (k Keys) statsKeys() []string {
	return []string{k.Config(), k.Waiting(), k.Active(), k.Dispatch(), k.Draw(), k.PreQueue()}
}

func (k Keys) closeKeys() []string {
	return []string{k.Config(), k.Waiting(), k.Dispatch(), k.PreQueue(), k.Entered(), k.Outbox()}
}

func (k Keys) leaveKeys(string) []string {
	return []string{k.Config(), k.Waiting(), k.Dispatch(), k.Left(), k.PreQueue(), k.LeftBins(), k.Traces(), k.Entered()}
}

func (k Keys) frontierKeys() []string {
	return []string{k.Config(), k.Waiting(), k.Seq(), k.Dispatch(), k.Left(), k.LeftBins()}
}

func (k Keys) presenceKeys() []string { return []string{k.Config(), k.Waiting(), k.Dispatch()} }

func (k Keys) leaseKeys() []string { return []string{k.Lock(), k.Dispatch(), k.Config()} }

func (k Keys) issueKeys() []string {
	return []string{k.Config(), k.Waiting(), k.Active(), k.Dispatch(), k.Outbox(), k.Seq(), k.Inflight(), k.Lock()}
}

func (k Keys) drawKeys() []string {
	return []string{k.Config(), k.Waiting(), k.PreQueue(), k.Draw(), k.Dispatch(), k.Outbox(), k.Left(), k.LeftBins()}
}

func (k Keys) consumeKeys(user string) []string {
	return []string{k.Token(user), k.Status(user), k.Active(), k.Inflight(), k.Consumed(user), k.Spent(user), k.Config()}
}

func (k Keys) checkKeys(user string) []string {
	return []string{k.Token(user), k.Spent(user), k.Status(user)}
}

func (k Keys) settleKeys(user string) []string {
	return []string{k.Status(user), k.Active(), k.Inflight(), k.Consumed(user)}
}

func (k Keys) restoreKeys(user string) []string {
	return []string{k.Status(user), k.Active(), k.Inflight(), k.Consumed(user), k.Outbox()}
}

func (k Keys) overdueKeys() []string { return []string{k.Inflight()} }

// inflightMember is a consumed token's entry in Inflight.
func inflightMember(tokenID, user string) string { return tokenID + ":" + user }

// Prefix is the queue's key prefix, hash tag included. Scripts that touch
// per-user keys of users they discover (the issue script's popped users)
// build those keys from it.
func (k Keys) Prefix() string { return k.prefix }
