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
-- KEYS: 1 token:<user>, 2 status:<user>, 3 active, 4 inflight, 5 consumed:<user>, 6 outbox
-- ARGV: 1 user id, 2 token id, 3 order id, 4 restorable (1/0), 5 queue id,
--       6 traceparent and 7 tracestate of the restore ('' for none): the
--       event it writes carries them, so its publish joins the failed
--       order's trace, 8 '1' when the caller waits for replicas: DUPLICATE
--       writes acked's no-op (the marker rewritten), so a redelivery after
--       a restore the replicas did not confirm is acknowledged only once
--       they hold it
local user, tid, oid = ARGV[1], ARGV[2], ARGV[3]
-- consumed: tokenId|secret|activateAt|expiresAt|orderId|seq
local c = redis.call('GET', KEYS[5])
local f = c and fields(c) or {}
local ours = f[1] == tid and f[5] == oid
if redis.call('GET', KEYS[2]) ~= 'ORDERING:' .. tid .. ':' .. oid then
  acked(ARGV[8], KEYS[2])
  return {'DUPLICATE'}
end
redis.call('ZREM', KEYS[4], tid .. ':' .. user)
if ours then
  redis.call('DEL', KEYS[5])
end
local now = now_ms()
if ARGV[4] ~= '1' or not ours then
  redis.call('SET', KEYS[2], 'FAILED:' .. tid .. ':' .. oid, 'KEEPTTL')
  redis.call('ZREM', KEYS[3], user)
  return {'FREED'}
end
local secret, activate, expires = f[2], tonumber(f[3]), tonumber(f[4])
if expires <= now then
  redis.call('SET', KEYS[2], 'EXPIRED:' .. tid, 'KEEPTTL')
  redis.call('ZREM', KEYS[3], user)
  emit(KEYS[6], traced({'type', 'TokenExpired', 'eid', tid .. '.expired', 'q', ARGV[5], 'user', user,
    'tid', tid, 'reason', 'RESTORE_TOO_LATE', 'at', now}, ARGV[6], ARGV[7]))
  return {'EXPIRED'}
end
redis.call('HSET', KEYS[1], 'token', secret, 'tokenId', tid, 'activateAt', activate, 'expiresAt', expires, 'seq', f[6] or '0')
redis.call('PEXPIREAT', KEYS[1], expires)
redis.call('SET', KEYS[2], 'TOKEN_ISSUED:' .. tid, 'PXAT', expires + 120000)
redis.call('ZADD', KEYS[3], expires, user)
emit(KEYS[6], traced({'type', 'TokenRestored', 'eid', tid .. '.restored.' .. oid, 'q', ARGV[5], 'user', user,
  'tid', tid, 'oid', oid, 'exp', expires, 'rem', expires - now, 'at', now}, ARGV[6], ARGV[7]))
return {'RESTORED', expires - now}
