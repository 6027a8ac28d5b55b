-- settle: an order for this token was committed. The slot is freed, the
-- marker says ORDERED. Safe to run twice (token id and order id are the
-- request id): only the in-flight marker of this very token and order is
-- settled; a repeat answers 0, "nothing left to settle".
-- Called by: Store.Settle (orders.go), for the order-service's order.Tokens (Service.settle, Service.reap)
-- KEYS: 1 status:<user>, 2 active, 3 inflight, 4 consumed:<user>
-- ARGV: 1 user id, 2 token id, 3 order id
local marker = redis.call('GET', KEYS[1])
local want = 'ORDERING:' .. ARGV[2] .. ':' .. ARGV[3]
-- The lease entry and consumed data go if they are this attempt's (or the
-- data expired); a later attempt with the same, restored, token keeps its own.
-- consumed: tokenId|secret|activateAt|expiresAt|orderId|seq
local c = redis.call('GET', KEYS[4])
local f = c and fields(c) or {}
if not c or (f[1] == ARGV[2] and f[5] == ARGV[3]) then
  redis.call('ZREM', KEYS[3], ARGV[2] .. ':' .. ARGV[1])
  redis.call('DEL', KEYS[4])
end
if marker ~= want then
  return 0
end
redis.call('SET', KEYS[1], 'ORDERED:' .. ARGV[2] .. ':' .. ARGV[3], 'KEEPTTL')
redis.call('ZREM', KEYS[2], ARGV[1])
return 1
