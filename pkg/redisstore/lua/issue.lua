-- issue: the leader's tick. Prunes expired slots, adds rate x elapsed to the
-- admission credit, pops the head of the line and gives each person a token,
-- a status marker, a slot and a TokenIssued event. One script: a crash leaves
-- all of it or none of it.
--
-- Per-user keys (token:<user>, status:<user>) are built from the queue's key
-- prefix, which carries the queue's hash tag: they live in the same cluster
-- slot as KEYS, so the script runs unchanged on Redis Cluster.
--
-- KEYS: 1 config, 2 waiting, 3 active, 4 dispatch, 5 outbox
-- ARGV: 1 epoch, 2 key prefix "wr:{q}:", 3 tick ms, 4 queue id,
--       5.. (secret, token id) pairs made by the caller, one per possible admission
local epoch = tonumber(ARGV[1])
local current = tonumber(redis.call('HGET', KEYS[4], 'epoch') or '0')
if epoch ~= current then
  return {'STALE', current}
end
local cfg = redis.call('HMGET', KEYS[1], 'state', 'admissionRatePerSec', 'maxActive', 'tokenTtlSeconds', 'activationSpreadMs')
if not cfg[1] then
  return {'NOT_FOUND'}
end
local prefix, tick_ms, q = ARGV[2], tonumber(ARGV[3]), ARGV[4]
local now = now_ms()

-- 1. Prune slots whose expiry passed. An unused token is a no-show: its
-- marker says EXPIRED and a TokenExpired event goes out. A slot whose order
-- is in flight is freed too (the order-service's reaper settles or restores
-- it, and a restore takes a slot again).
local expired = 0
local stale = redis.call('ZRANGEBYSCORE', KEYS[3], '-inf', now, 'LIMIT', 0, 1000)
for _, user in ipairs(stale) do
  redis.call('ZREM', KEYS[3], user)
  local skey = prefix .. 'status:' .. user
  local marker = redis.call('GET', skey)
  if marker_state(marker) == 'TOKEN_ISSUED' then
    local tid = string.sub(marker, 14)
    redis.call('SET', skey, 'EXPIRED:' .. tid, 'KEEPTTL')
    emit(KEYS[5], {'type', 'TokenExpired', 'eid', tid .. '.expired', 'q', q, 'user', user,
      'tid', tid, 'reason', 'NO_SHOW', 'at', now})
    expired = expired + 1
  end
end

-- 2. Credit. Elapsed time comes from the last tick (Redis TIME), so a slow
-- tick is made up for; the carry is capped (below), so a long gap never
-- becomes a burst. Nothing accrues while not OPEN: a queue that reopens
-- resumes at its rate.
local d = redis.call('HMGET', KEYS[4], 'credit', 'lastTickMs', 'measuredRate')
local last = tonumber(d[2]) or now
local elapsed = math.max(0, now - last)
local rate = tonumber(cfg[2])
if cfg[1] ~= 'OPEN' then
  redis.call('HSET', KEYS[4], 'credit', 0, 'lastTickMs', now, 'measuredRate', 0)
  return {'PAUSED', 0, expired}
end
-- The batch cap is ceil(rate x span) + 1 where span is the time this tick
-- covers: its elapsed time, at least one tick (a tick never issues more than
-- its share plus one) and at most ten (a leader that was gone longer, a
-- failover, catches up one second's worth, not a burst of everything
-- missed). Slow ticks (a loaded machine, many queues) thus keep the rate.
local base_cap = math.ceil(rate * tick_ms / 1000) + 1
local span = math.min(math.max(tick_ms, elapsed), 10 * tick_ms)
local batch_cap = math.ceil(rate * span / 1000) + 1
local credit = math.min((tonumber(d[1]) or 0) + rate * elapsed / 1000, batch_cap + base_cap)

-- 3. How many: credit, batch cap, free slots, grants supplied, people waiting.
local waiting = redis.call('ZCARD', KEYS[2])
local grants = math.floor((#ARGV - 4) / 2)
local n = math.min(math.floor(credit), batch_cap, grants, waiting)
local max_active = tonumber(cfg[3])
if max_active > 0 then
  n = math.min(n, math.max(0, max_active - redis.call('ZCARD', KEYS[3])))
end

-- 4. Admit the head of the line, in the order people came.
local ttl_ms = tonumber(cfg[4]) * 1000
local spread = tonumber(cfg[5])
local popped = {}
if n > 0 then
  popped = redis.call('ZPOPMIN', KEYS[2], n)
end
local issued = #popped / 2
for i = 1, issued do
  local user, seq = popped[2 * i - 1], popped[2 * i]
  local secret, tid = ARGV[3 + 2 * i], ARGV[4 + 2 * i]
  -- Activation times spread evenly over the window, so one batch does not
  -- reach the order path in the same millisecond.
  local activate = now + math.floor(spread * (i - 1) / issued)
  local expires = activate + ttl_ms
  local tkey = prefix .. 'token:' .. user
  redis.call('DEL', tkey)
  redis.call('HSET', tkey, 'token', secret, 'tokenId', tid, 'activateAt', activate, 'expiresAt', expires, 'seq', seq)
  redis.call('PEXPIREAT', tkey, expires)
  redis.call('SET', prefix .. 'status:' .. user, 'TOKEN_ISSUED:' .. tid, 'PXAT', expires + 120000)
  redis.call('ZADD', KEYS[3], expires, user)
  emit(KEYS[5], {'type', 'TokenIssued', 'eid', tid .. '.issued', 'q', q, 'user', user, 'tid', tid,
    'seq', seq, 'act', activate, 'exp', expires, 'at', now})
end

-- 5. Bookkeeping, and the measured rate the gateway's ETA uses: an
-- exponentially weighted average over about five seconds, updated only on
-- ticks with people waiting (an idle queue says nothing about its rate).
local measured = tonumber(d[3]) or 0
if waiting > 0 and elapsed > 0 then
  local instant = issued * 1000 / elapsed
  if measured == 0 then
    measured = instant
  else
    measured = measured + (1 - math.exp(-elapsed / 5000)) * (instant - measured)
  end
end
redis.call('HSET', KEYS[4], 'credit', credit - issued, 'lastTickMs', now, 'measuredRate', measured)
redis.call('HINCRBY', KEYS[4], 'issuedTotal', issued)
return {'OK', issued, expired, waiting - issued}
