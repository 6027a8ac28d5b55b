-- consume: the order-service presents a user's token. Exactly one of any
-- number of concurrent calls with the same token gets through: the token is
-- marked ORDERING and its data moved to inflight with a lease, in one step.
-- The token is looked up under the caller's own user and queue, so another
-- user's or another queue's token simply does not match.
--
-- Safe to run twice: the order id is the request id. A repeat of the call
-- that took the token (a client that timed out and sent it again) finds the
-- in-flight marker of this very order and answers OK as the first call did,
-- instead of "invalid token" to the rightful buyer.
--
-- Never late: a call that reaches Redis after its deadline (ARGV 6, Redis
-- TIME ms; 0 none), when its caller has given up on it and may have
-- answered the buyer, is refused ({'LATE'}) and changes nothing. Applied,
-- it would hold the token for an order nobody places until the lease ran
-- out.
--
-- Both OK answers carry the queue's maxOrdersPerUser (0 = no limit), so the
-- order transaction enforces the knob as it is now without another round
-- trip.
--
-- Called by: Store.Consume (orders.go), for the order-service's order.Tokens (Service.Place)
-- KEYS: 1 token:<user> (a token an earlier version issued: live_token), 2 status:<user>, 3 active, 4 inflight, 5 consumed:<user>, 6 spent:<user>, 7 config
-- ARGV: 1 presented secret, 2 user id, 3 order id, 4 lease ms, 5 slot grace ms, 6 deadline ms,
--       7 '1' when the caller waits for replicas: a repeat's OK writes
--       acked's no-op (the marker rewritten)
local now = now_ms()
local late = tonumber(ARGV[6] or '0') or 0
if late > 0 and now > late then
  return {'LATE'}
end
local function order_limit()
  return tonumber(redis.call('HGET', KEYS[7], 'maxOrdersPerUser') or '0') or 0
end
local tok, m = live_token(KEYS[2], KEYS[1], now)
local oid = ARGV[3]
if not tok or tok[1] ~= ARGV[1] then
  if marker_state(m) == 'ORDERING' and string.sub(m, -(#oid + 1)) == ':' .. oid then
    -- consumed: tokenId|secret|activateAt|expiresAt|orderId|seq
    local c = redis.call('GET', KEYS[5])
    local f = c and fields(c) or {}
    if f[2] == ARGV[1] and f[5] == oid then
      acked(ARGV[7], KEYS[2])
      return {'OK', f[1], f[3], f[4], order_limit()}
    end
  end
  return {'INVALID'}
end
local activate, expires = tonumber(tok[3]), tonumber(tok[4])
if now < activate then
  return {'NOT_ACTIVE', activate - now}
end
local tid = tok[2]
local deadline = now + tonumber(ARGV[4])
-- The marker and the consumed data live until the token could no longer be
-- restored anyway (its expiry, or the lease if later) plus two minutes.
local keep = math.max(expires, deadline) + 120000
if tok.legacy then
  redis.call('DEL', KEYS[1])
end
redis.call('ZADD', KEYS[4], deadline, tid .. ':' .. ARGV[2])
-- What a restore needs to put the token back as it was.
redis.call('SET', KEYS[5], table.concat({tid, tok[1], tok[3], tok[4], oid, tok[5] or '0'}, '|'), 'PXAT', keep)
redis.call('SET', KEYS[2], 'ORDERING:' .. tid .. ':' .. oid, 'PXAT', keep)
-- The secret stays known as spent, so the holder's retry of this order can
-- still replay its answer after settle or restore dropped the data above.
redis.call('SET', KEYS[6], tok[1], 'PXAT', keep)
-- The slot stays taken while the order is in flight, a little past the lease
-- so the reaper can settle or restore before the dispatcher prunes it.
redis.call('ZADD', KEYS[3], deadline + tonumber(ARGV[5]), ARGV[2])
return {'OK', tid, activate, expires, order_limit()}
