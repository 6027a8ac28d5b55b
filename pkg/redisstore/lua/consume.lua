-- consume: the order-service presents a user's token. Exactly one of any
-- number of concurrent calls with the same token gets through: the token is
-- deleted and its data moved to inflight with a lease, in one step.
-- The token is looked up under the caller's own user and queue, so another
-- user's or another queue's token simply does not match.
-- KEYS: 1 token:<user>, 2 status:<user>, 3 active, 4 inflight, 5 inflight data
-- ARGV: 1 presented secret, 2 user id, 3 order id, 4 lease ms, 5 slot grace ms
local tok = redis.call('HMGET', KEYS[1], 'token', 'tokenId', 'activateAt', 'expiresAt', 'seq')
if not tok[1] or tok[1] ~= ARGV[1] then
  return {'INVALID'}
end
local now = now_ms()
local activate, expires = tonumber(tok[3]), tonumber(tok[4])
if now >= expires then
  return {'INVALID'}
end
if now < activate then
  return {'NOT_ACTIVE', activate - now}
end
local tid, oid = tok[2], ARGV[3]
local deadline = now + tonumber(ARGV[4])
redis.call('DEL', KEYS[1])
redis.call('ZADD', KEYS[4], deadline, tid)
-- What a restore needs to put the token back as it was.
redis.call('HSET', KEYS[5], tid, table.concat({ARGV[2], tok[1], tok[3], tok[4], oid, tok[5] or '0'}, '|'))
redis.call('SET', KEYS[2], 'ORDERING:' .. tid .. ':' .. oid, 'PXAT', math.max(expires, deadline) + 120000)
-- The slot stays taken while the order is in flight, a little past the lease
-- so the reaper can settle or restore before the dispatcher prunes it.
redis.call('ZADD', KEYS[3], deadline + tonumber(ARGV[5]), ARGV[2])
return {'OK', tid, activate, expires}
