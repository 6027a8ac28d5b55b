-- close: stop taking entries and drop the waiting line. Issued tokens stay
-- valid; their holders are already through.
-- KEYS: 1 config, 2 waiting
-- ARGV: none
if redis.call('EXISTS', KEYS[1]) == 0 then
  return -1
end
redis.call('HSET', KEYS[1], 'state', 'CLOSED', 'updatedAtMs', now_ms())
redis.call('HINCRBY', KEYS[1], 'version', 1)
local n = redis.call('ZCARD', KEYS[2])
redis.call('DEL', KEYS[2])
return n
