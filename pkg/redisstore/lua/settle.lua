-- settle: an order for this token was committed. The slot is freed, the
-- marker says ORDERED. Idempotent: only the in-flight marker of this very
-- token and order is settled.
-- KEYS: 1 status:<user>, 2 active, 3 inflight, 4 inflight data
-- ARGV: 1 user id, 2 token id, 3 order id
local marker = redis.call('GET', KEYS[1])
local want = 'ORDERING:' .. ARGV[2] .. ':' .. ARGV[3]
redis.call('ZREM', KEYS[3], ARGV[2])
redis.call('HDEL', KEYS[4], ARGV[2])
if marker ~= want then
  return 0
end
redis.call('SET', KEYS[1], 'ORDERED:' .. ARGV[2] .. ':' .. ARGV[3], 'KEEPTTL')
redis.call('ZREM', KEYS[2], ARGV[1])
return 1
