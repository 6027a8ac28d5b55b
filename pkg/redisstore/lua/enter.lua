-- enter: give a user a place in line, or their token back, or say why not.
-- KEYS: 1 config, 2 waiting, 3 seq, 4 token:<user>, 5 status:<user>, 6 dispatch
-- ARGV: 1 user id
local cfg = redis.call('HMGET', KEYS[1], 'state', 'admissionRatePerSec', 'maxQueueSize', 'maxWaitSeconds')
if not cfg[1] then
  return {'NOT_FOUND'}
end
local now = now_ms()
local measured = measured_rate(KEYS[6], now)
local total = redis.call('ZCARD', KEYS[2])

-- A token holder gets the token back, even from a closed queue: it is theirs.
local tok = redis.call('HMGET', KEYS[4], 'token', 'tokenId', 'activateAt', 'expiresAt')
if tok[1] then
  return reply('ADMITTED', cfg[1], cfg[2], measured, total, 0, tok)
end
-- An order with the token is in flight: the user is through, not back in
-- line (a new place now would give them a second token).
if marker_state(redis.call('GET', KEYS[5])) == 'ORDERING' then
  return reply('ORDERING', cfg[1], cfg[2], measured, total, 0)
end
if cfg[1] == 'CLOSED' then
  return reply('CLOSED', cfg[1], cfg[2], measured, total, 0)
end

-- Already waiting: the same place. A refresh never moves anyone back.
local rank = redis.call('ZRANK', KEYS[2], ARGV[1])
if rank then
  return reply('WAITING', cfg[1], cfg[2], measured, total, rank + 1)
end

local cap = math.min(tonumber(cfg[3]), math.floor(tonumber(cfg[4]) * tonumber(cfg[2])))
if total >= cap then
  return reply('FULL', cfg[1], cfg[2], measured, total, 0)
end

-- The score is a sequence number, not a clock: two gateways with skewed
-- clocks cannot reorder the line. A new score is the largest, so the new
-- member's rank is the old size.
local seq = redis.call('INCR', KEYS[3])
redis.call('ZADD', KEYS[2], 'NX', seq, ARGV[1])
return reply('WAITING', cfg[1], cfg[2], measured, total + 1, total + 1)
