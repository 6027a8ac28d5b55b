-- restore: an order with this token failed. Restorable: the token goes back
-- with its original expiry (so its remaining TTL), slot kept, TokenRestored
-- emitted; if that expiry has passed the slot is freed and TokenExpired is
-- emitted instead. Not restorable (sold out): the slot is freed.
--
-- Safe to run twice: token id and order id are the request id. Only the
-- in-flight marker of this very token and order is acted on, so a repeat, a
-- redelivered OrderFailed, or one that arrives after the token was restored
-- and used again, changes nothing and answers DUPLICATE.
--
-- Called by: Store.Restore (orders.go), for the admission-dispatcher's restore.Store (Handler.Handle)
-- KEYS: 1 status:<user> (the token goes back into it), 2 active, 3 inflight, 4 consumed:<user>, 5 outbox
-- ARGV: 1 user id, 2 token id, 3 order id, 4 restorable (1/0), 5 queue id,
--       6 traceparent and 7 tracestate of the restore ('' for none): the
--       event it writes carries them, so its publish joins the failed
--       order's trace, 8 '1' when the caller waits for replicas: DUPLICATE
--       writes acked's no-op (the marker rewritten), so a redelivery after
--       a restore the replicas did not confirm is acknowledged only once
--       they hold it
local user, tid, oid = ARGV[1], ARGV[2], ARGV[3]
-- consumed: tokenId|secret|activateAt|expiresAt|orderId|seq
local c = redis.call('GET', KEYS[4])
local f = c and fields(c) or {}
local ours = f[1] == tid and f[5] == oid
if redis.call('GET', KEYS[1]) ~= 'ORDERING:' .. tid .. ':' .. oid then
  acked(ARGV[8], KEYS[1])
  return {'DUPLICATE'}
end
redis.call('ZREM', KEYS[3], tid .. ':' .. user)
if ours then
  redis.call('DEL', KEYS[4])
end
local now = now_ms()
if ARGV[4] ~= '1' or not ours then
  redis.call('SET', KEYS[1], 'FAILED:' .. tid .. ':' .. oid, 'KEEPTTL')
  redis.call('ZREM', KEYS[2], user)
  return {'FREED'}
end
local secret, expires = f[2], tonumber(f[4])
if expires <= now then
  redis.call('SET', KEYS[1], 'EXPIRED:' .. tid, 'KEEPTTL')
  redis.call('ZREM', KEYS[2], user)
  emit(KEYS[5], traced({'type', 'TokenExpired', 'eid', tid .. '.expired', 'q', ARGV[5], 'user', user,
    'tid', tid, 'reason', 'RESTORE_TOO_LATE', 'at', now}, ARGV[6], ARGV[7]))
  return {'EXPIRED'}
end
redis.call('SET', KEYS[1], token_marker(tid, secret, f[3], f[4], f[6] or '0'), 'PXAT', string.format('%d', expires + 120000))
redis.call('ZADD', KEYS[2], f[4], user)
emit(KEYS[5], traced({'type', 'TokenRestored', 'eid', tid .. '.restored.' .. oid, 'q', ARGV[5], 'user', user,
  'tid', tid, 'oid', oid, 'exp', expires, 'rem', expires - now, 'at', now}, ARGV[6], ARGV[7]))
return {'RESTORED', expires - now}
