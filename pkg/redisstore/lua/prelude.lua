-- Shared by every script. Time comes from the server, never from the caller.
-- Called by: script (scripts.go), which puts it in front of every other script, for every service
local function now_ms()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end

-- Microseconds (about 1.8e15: exact in a Lua number), for the enter times
-- a queue split into lines is admitted by (queue/arrival.go).
local function now_us()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000000 + tonumber(t[2])
end

-- What the estimate of a wait needs from the dispatch hash: the
-- dispatcher's measured admission rate, if it measured one in the last five
-- seconds ("0" otherwise: the caller then uses the configured rate), and the
-- share of people who left the line before their turn, of the resolved
-- cohort: everyone who entered before the last person admitted
-- (leftResolved / (leftResolved + issuedTotal); "0" until twenty). {rate,
-- leaveShare}, as strings.
-- An ADAPTIVE queue's effective rate, set by its leader, is returned as
-- figures.effective: replies show it in place of the configured rate.
local function admission_figures(dispatch_key, now)
  local d = redis.call('HMGET', dispatch_key, 'measuredRate', 'lastTickMs', 'leftResolved', 'issuedTotal', 'effectiveRate')
  local rate, share = '0', '0'
  if d[1] and d[2] and now - tonumber(d[2]) <= 5000 then
    rate = d[1]
  end
  local left, issued = tonumber(d[3] or '0') or 0, tonumber(d[4] or '0') or 0
  if left + issued >= 20 then
    share = tostring(left / (left + issued))
  end
  local figures = {rate, share}
  figures.effective = d[5] or nil
  return figures
end

local function measured_rate(dispatch_key, now)
  return admission_figures(dispatch_key, now)[1]
end

-- A queue's schedule: its start time (ms, 0 for none) and the state of its
-- pre-queue draw (nil: it never had a start time). A script that may be the
-- first to act after the start closes the pre-queue (SCHEDULED ->
-- DRAWING): it reserves one sequence number per pre-queued person, right
-- after the last one given, so everyone who enters from now on is behind
-- all of them; the dispatcher leader then places them in drawn order.
-- A start time removed before the start means now. A read-only caller
-- passes no seq_key: it learns the schedule and closes nothing.
--
-- The draw and pre-queue keys are only touched while the config's
-- drawPending is set (from the PUT that set the start time to the end of
-- the draw): a queue without a pending draw never reads them, so its ticks
-- keep working on a slot that is migrating (a key this node does not have
-- fails a script that touches it).
local function schedule(cfg_starts, cfg_pending, draw_key, prequeue_key, seq_key, now)
  local starts = tonumber(cfg_starts or '0') or 0
  if cfg_pending ~= '1' then
    return starts, nil
  end
  local d = redis.call('HMGET', draw_key, 'state', 'startedAtMs')
  local state = d[1] or nil
  if seq_key and state == 'SCHEDULED' and (starts == 0 or now >= starts) then
    local n = redis.call('ZCARD', prequeue_key)
    local base = tonumber(redis.call('GET', seq_key) or '0')
    redis.call('SET', seq_key, base + n)
    redis.call('HSET', draw_key, 'state', 'DRAWING', 'base', base, 'count', n, 'next', base, 'startedAtMs', now)
    state, d[2] = 'DRAWING', now
  end
  if starts == 0 and state then
    starts = tonumber(d[2] or '0') or 0
  end
  return starts, state
end

-- Adds the schedule to figures (what reply sends): start time, time left
-- until it, people pre-queued; nothing for a queue without a start time.
local function with_schedule(figures, starts, state, prequeue_key, now)
  if starts > 0 or state then
    figures[3], figures[4], figures[5] = starts, math.max(0, starts - now), 0
    if state == 'SCHEDULED' or state == 'DRAWING' then
      figures[5] = redis.call('ZCARD', prequeue_key)
    end
  end
  return figures
end

-- Reply layout shared with standingReply in Go:
-- {outcome, queueState, configuredRate (an ADAPTIVE queue's effective
--  one), measuredRate, total, position,
--  leaveShare, startsAtMs, startsInMs, preQueued, token, tokenId,
--  activateAt, expiresAt, seq, generation}; figures is what
--  admission_figures returned, with_schedule's additions if any. seq is the
--  place's sequence number when the caller asked for it (a ticket is made
--  of it), generation the queue configuration's createdAtMs.
local function reply(outcome, cfg_state, cfg_rate, figures, total, position, tok, seq, generation)
  local r = {outcome, cfg_state, figures.effective or cfg_rate, figures[1], total, position, figures[2],
    figures[3] or 0, figures[4] or 0, figures[5] or 0, false, false, false, false, seq or 0, generation or 0}
  if tok then
    r[11], r[12], r[13], r[14] = tok[1], tok[2], tok[3], tok[4]
  end
  return r
end

-- Leaver bins (queue.FineBin, queue.CoarseBin): the leftbins hash counts
-- the leavers still in left (not yet passed by admission) per bin of
-- sequence numbers, field 'f<seq / 16>' and 'c<seq / 1024>'. The replicas'
-- frontier caches read them to place a ticket's holder without a query.
local FINE_BIN, COARSE_BIN = 16, 1024

-- The channel the issue script announces a moved admission frontier on
-- (redisstore.FrontierChannel).
local FRONTIER_CHANNEL = 'wr:frontier'

local function bin_fields(seq)
  return 'f' .. string.format('%d', math.floor(seq / FINE_BIN)), 'c' .. string.format('%d', math.floor(seq / COARSE_BIN))
end

-- Adds n (negative: takes) to the bins of each sequence number in seqs; a
-- bin that reaches zero is deleted. New leavers (n > 0) are announced to
-- the replicas' frontier caches ("<line> left <count>"), which read the
-- line again once the leavers they do not know of reach a tenth of a
-- percent of it: a ticket's place stays within that of the truth between
-- reads.
local function bins_add(bins_key, seqs, n)
  local by = {}
  for _, seq in ipairs(seqs) do
    local f, c = bin_fields(seq)
    by[f] = (by[f] or 0) + n
    by[c] = (by[c] or 0) + n
  end
  for field, k in pairs(by) do
    if redis.call('HINCRBY', bins_key, field, k) <= 0 then
      redis.call('HDEL', bins_key, field)
    end
  end
  if n > 0 and #seqs > 0 then
    redis.call('PUBLISH', FRONTIER_CHANNEL, string.match(bins_key, '{([^}~]*)') .. ' left ' .. string.format('%d', n * #seqs))
  end
end

-- Status markers are "<STATE>:<tokenId>[:<orderId>]"; the state decides what
-- a user is told, the ids make every transition idempotent.
local function marker_state(m)
  if not m then
    return nil
  end
  local i = string.find(m, ':', 1, true)
  if i then
    return string.sub(m, 1, i - 1)
  end
  return m
end

-- A token lives in its holder's status marker (issue.lua, restore.lua):
-- "TOKEN_ISSUED:<tokenId>|<secret>|<activateAt>|<expiresAt>|<seq>", one key
-- and one SET a person, where a hash of the token and a marker beside it
-- were two keys and three calls. token_marker builds it (times in ms,
-- as strings: a Lua number would be formatted as a float on every call).
local function token_marker(tid, secret, activate, expires, seq)
  return 'TOKEN_ISSUED:' .. tid .. '|' .. secret .. '|' .. activate .. '|' .. expires .. '|' .. seq
end

-- The token id a marker names: "<STATE>:<tokenId>[...]".
local function marker_tid(m)
  return string.match(m, '^[^:]*:([^:|]*)')
end

-- The user's token while it is live (now before its expiry):
-- {secret, tokenId, activateAt, expiresAt, seq}, and the marker read; nil
-- and the marker otherwise. A token issued by an earlier version (marker
-- "TOKEN_ISSUED:<tokenId>", the token in the hash token_key, which expires
-- with it) is read from there, so a rolling upgrade strands nobody's token.
local function live_token(status_key, token_key, now)
  local m = redis.call('GET', status_key)
  if marker_state(m) ~= 'TOKEN_ISSUED' then
    return nil, m
  end
  local tid, secret, activate, expires, seq = string.match(m, '^TOKEN_ISSUED:([^|]*)|([^|]*)|(%d+)|(%d+)|(%d*)$')
  if tid then
    if now < tonumber(expires) then
      return {secret, tid, activate, expires, seq}, m
    end
    return nil, m
  end
  local tok = redis.call('HMGET', token_key, 'token', 'tokenId', 'activateAt', 'expiresAt', 'seq')
  if tok[1] and now < (tonumber(tok[4]) or 0) then
    tok.legacy = true
    return tok, m
  end
  return nil, m
end

-- Lua unpacks at most about 8,000 values at once ("too many results to
-- unpack"), and a tick may admit a second's worth at 100,000 a second: a
-- call with a list of people goes in pieces of UNPACK_MAX, and the replies
-- of a reading call are joined in order.
local UNPACK_MAX = 1000
local function call_list(cmd, key, list)
  local out = {}
  for i = 1, #list, UNPACK_MAX do
    local r = redis.call(cmd, key, unpack(list, i, math.min(i + UNPACK_MAX - 1, #list)))
    if type(r) == 'table' then
      for j = 1, #r do
        out[#out + 1] = r[j]
      end
    end
  end
  return out
end

-- The people an outbox holds: its entries, and the people a TokensIssued
-- entry holds beyond its one (outboxExtra of the dispatch hash, kept by
-- issue.lua and outbox_ack.lua). An empty stream holds nobody, whatever
-- the count says, and the count is reset then.
local function outbox_people(outbox, dispatch)
  local n = redis.call('XLEN', outbox)
  local extra = tonumber(redis.call('HGET', dispatch, 'outboxExtra') or '0') or 0
  if n == 0 then
    if extra ~= 0 then
      redis.call('HDEL', dispatch, 'outboxExtra')
    end
    return 0
  end
  return n + math.max(0, extra)
end

-- Appends one event to the queue's outbox stream, in the same script (and so
-- the same atomic step) as the state change it reports.
local function emit(outbox, fields)
  redis.call('XADD', outbox, '*', unpack(fields))
end

-- The W3C trace context an event is written with ('' for none): its
-- publish continues that trace (fields tp and ts of the outbox entry).
local function traced(fields, traceparent, tracestate)
  if traceparent and traceparent ~= '' then
    fields[#fields + 1], fields[#fields + 2] = 'tp', traceparent
    if tracestate and tracestate ~= '' then
      fields[#fields + 1], fields[#fields + 2] = 'ts', tracestate
    end
  end
  return fields
end

-- Splits "a|b|c" into {'a', 'b', 'c'}.
local function fields(s)
  local f = {}
  for part in string.gmatch(s, '[^|]+') do
    f[#f + 1] = part
  end
  return f
end

-- Sub-lines (see queue/lines.go). A line's config copy carries `shards` (the
-- queue's count) and `line` (its index); `resharding` is set on every line
-- while an operator changes the count. A caller that routed a user by a
-- count other than the line's own (a stale cache) is told the count, so it
-- can route again; nobody gets a place in a line that is not theirs.
-- Returns nil when the caller's count is right, else the reply to return.
local function line_check(cfg_key, caller_shards)
  local l = redis.call('HMGET', cfg_key, 'shards', 'resharding')
  if l[2] and (tonumber(l[2]) or 0) > now_ms() then
    return {'RESHARDING'}
  end
  local shards = tonumber(l[1] or '1') or 1
  if caller_shards ~= '' and tonumber(caller_shards) ~= shards then
    return {'RESHARD', shards}
  end
  return nil
end

-- line_share is this line's part of a whole split over the queue's lines
-- (queue.LineShare): the parts add up to the whole.
local function line_share(cfg_key, whole)
  local l = redis.call('HMGET', cfg_key, 'shards', 'line')
  local shards, line = tonumber(l[1] or '1') or 1, tonumber(l[2] or '0') or 0
  if shards <= 1 then
    return whole
  end
  local part = math.floor(whole / shards)
  if line < whole % shards then
    part = part + 1
  end
  return part
end

-- acked: a repeat answer's no-op for the replicas. A caller that waits for
-- the replicas (WAIT, Store.RequireReplicas) waits for the changes its own
-- connection made; the repeat of a call whose WAIT failed may come on
-- another connection that made none, and would be acknowledged before the
-- first call's change reached them. Asked (flag '1'), this rewrites a value
-- with itself: nothing changes, but the write reaches the replicas after
-- the first call's, so the WAIT covers both. With field, an integer field
-- of a hash (HINCRBY by 0); without, a string key, if it exists.
local function acked(flag, key, field)
  if flag ~= '1' then
    return
  end
  if field then
    redis.call('HINCRBY', key, field, 0)
    return
  end
  local v = redis.call('GET', key)
  if v then
    redis.call('SET', key, v, 'KEEPTTL')
  end
end

-- Presence (the queue knob awayAfterSeconds; docs/DESIGN.md, "Presence").
-- Three sets of each line, built from its prefix: seen (user -> their last
-- sign of life, ms of Redis time: an enter, a batch of a replica's
-- sightings), away (user -> their place's sequence number: out of the
-- line, not admitted while away) and skipped (user -> when admission
-- passed their place while they were away, ms). A person who entered
-- before the knob was on has no sighting: never away.
-- A line whose replicas sent no sightings for this long (presenceMs in the
-- dispatch hash; queue.PresenceStaleAfter) is not swept: a gateway cut off
-- from Redis must not make its people away.
local PRESENCE_STALE_MS = 3000

-- mark_away takes a person out of the line into away: a leaver for the
-- places behind theirs (left, leftbins), so positions and waits count only
-- present people ahead; at or behind the frontier (a person who came back
-- and went again), passed over at once. Their entry in left is
-- "<seq>:!<user>" ('!' is in no user id). They are leavers of the leave
-- share (leftResolved) like anyone who pressed leave: counted when
-- admission passes their place (the tick), or now for a place already
-- passed, and taken out again if they come back (come_back), for then they
-- are admitted. The drill TestETAHoldsWhenPeopleLeave measured the
-- estimate without them at 57 % inside its interval when three in ten
-- close the tab. All keys were read by the caller.
local function mark_away(prefix, waiting_key, dispatch_key, user, seq, frontier, now)
  redis.call('ZREM', waiting_key, user)
  redis.call('ZREM', prefix .. 'seen', user)
  redis.call('ZADD', prefix .. 'away', seq, user)
  if seq <= frontier then
    redis.call('ZADD', prefix .. 'skipped', now, user)
    redis.call('HINCRBY', dispatch_key, 'leftResolved', 1)
  else
    local s = string.format('%d', seq)
    redis.call('ZADD', prefix .. 'left', s, s .. ':!' .. user)
    bins_add(prefix .. 'leftbins', {seq}, 1)
  end
  redis.call('HINCRBY', dispatch_key, 'awayTotal', 1)
end

-- come_back puts an away person back at their place, seen now: ahead of
-- everyone who entered after them, so one whose place was passed is the
-- next admitted (and no leaver of the leave share any more). Returns 1.
-- All keys were read by the caller.
local function come_back(prefix, waiting_key, dispatch_key, user, seq, now)
  if redis.call('ZREM', prefix .. 'skipped', user) == 1 then
    if (tonumber(redis.call('HGET', dispatch_key, 'leftResolved') or '0') or 0) > 0 then
      redis.call('HINCRBY', dispatch_key, 'leftResolved', -1)
    end
  else
    local s = string.format('%d', seq)
    redis.call('ZREM', prefix .. 'left', s .. ':!' .. user)
    bins_add(prefix .. 'leftbins', {seq}, -1)
  end
  redis.call('ZREM', prefix .. 'away', user)
  redis.call('ZADD', waiting_key, seq, user)
  redis.call('ZADD', prefix .. 'seen', now, user)
  redis.call('HINCRBY', dispatch_key, 'returnedTotal', 1)
  return 1
end

-- Whether a line's presence keys may exist: presence on (its config's
-- awayAfterSeconds above 0), or flagged by a tick while it was on
-- (presenceKeys in the dispatch hash, cleared once they are gone). A line
-- that never had presence touches none of them.
local function presence_flagged(away_after, dispatch_key)
  return (tonumber(away_after or '0') or 0) > 0 or redis.call('HGET', dispatch_key, 'presenceKeys') == '1'
end

-- Reads every presence key (EXISTS, one key each: a slot migrating fails
-- the script here, before it changed anything).
local function presence_reads(prefix)
  for _, k in ipairs({'seen', 'away', 'skipped', 'left', 'leftbins'}) do
    redis.call('EXISTS', prefix .. k)
  end
end

-- History (docs/DESIGN.md, "History"): each line counts what happened in
-- each minute of Redis time in its minutes hash, field
-- "<minute>:<figure>" (minute: whole minutes since the epoch). Figures:
-- arr (people who got a place or a pre-queue entry), adm (admitted), exp
-- (tokens expired unused), left (left the line), aband (removed away past
-- their grace), w<i> (admitted people whose wait fell in bucket i, see
-- wait_bucket) and wmax (the longest wait, ms). The admission tick sends
-- each finished minute to the outbox as a QueueMinute event (issue.lua).
local function minute_of(now)
  return string.format('%d', math.floor(now / 60000))
end

local function minute_add(prefix, figure, n, now)
  if n ~= 0 then
    redis.call('HINCRBY', prefix .. 'minutes', minute_of(now) .. ':' .. figure, n)
  end
end

-- Wait buckets: 0 is under 100 ms; i >= 1 is [100 * 2^((i-1)/4),
-- 100 * 2^(i/4)) ms, four to a doubling (a bucket is 19 % wide); the last,
-- WAIT_BUCKETS - 1 (from about 5 hours), is open. queue.WaitBucketBounds
-- (Go) is the same table.
local WAIT_BUCKETS = 72
local function wait_bucket(ms)
  if ms < 100 then
    return 0
  end
  return math.min(WAIT_BUCKETS - 1, math.floor(4 * math.log(ms / 100) / math.log(2)) + 1)
end
