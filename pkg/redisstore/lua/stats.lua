-- stats: a queue's knobs and live figures.
-- KEYS: 1 config, 2 waiting, 3 active, 4 dispatch
local cfg = redis.call('HGETALL', KEYS[1])
if #cfg == 0 then
  return {'NOT_FOUND'}
end
local now = now_ms()
local waiting = redis.call('ZCARD', KEYS[2])
-- Slots whose expiry passed are free even before the dispatcher prunes them.
local active = redis.call('ZCOUNT', KEYS[3], '(' .. now, '+inf')
local d = redis.call('HMGET', KEYS[4], 'issuedTotal', 'heldReason')
return {'OK', cfg, waiting, active, d[1] or '0', measured_rate(KEYS[4], now), d[2] or ''}
