-- close: stop taking entries and drop the waiting line and the pre-queue.
-- Issued tokens stay valid; their holders are already through.
-- The enter times of the people in line (entered) go with them.
-- On an operator's behalf (ARGV given, the queue's first line only) it
-- writes their QueueChanged (action CLOSED) to the outbox with the change.
-- Called by: Store.Close, Store.CloseBy (store.go), for the queue-gateway's app.Store (Service.Close)
-- KEYS: 1 config, 2 waiting, 3 dispatch, 4 prequeue, 5 entered, 6 outbox
-- ARGV: none, or 1 the operator's subject, 2 their address, 3 the queue id
if redis.call('EXISTS', KEYS[1]) == 0 then
  return -1
end
-- Presence (see mark_away): the away go with the line.
local prefix = string.sub(KEYS[1], 1, #KEYS[1] - #'config')
local flagged = presence_flagged(redis.call('HGET', KEYS[1], 'awayAfterSeconds'), KEYS[3])
if flagged then
  for _, k in ipairs({'seen', 'away', 'skipped'}) do
    redis.call('EXISTS', prefix .. k)
  end
end
local was = redis.call('HGET', KEYS[1], 'state') or 'OPEN'
local now = now_ms()
redis.call('HSET', KEYS[1], 'state', 'CLOSED', 'updatedAtMs', now)
local version = redis.call('HINCRBY', KEYS[1], 'version', 1)
local n = redis.call('ZCARD', KEYS[2]) + redis.call('ZCARD', KEYS[4])
redis.call('DEL', KEYS[2], KEYS[4], KEYS[5])
if flagged then
  n = n + redis.call('ZCARD', prefix .. 'away')
  redis.call('DEL', prefix .. 'seen', prefix .. 'away', prefix .. 'skipped')
end
if ARGV[1] and ARGV[1] ~= '' then
  local born = redis.call('HGET', KEYS[1], 'createdAtMs') or '0'
  emit(KEYS[6], {'type', 'QueueChanged', 'eid', ARGV[3] .. ':' .. born .. ':v' .. version .. '.closed', 'q', ARGV[3],
    'at', now, 'actor', ARGV[1], 'addr', ARGV[2], 'closed', '1', 'outcome', 'APPLIED',
    'before', cjson.encode({state = was}), 'after', cjson.encode({state = 'CLOSED', dropped = n})})
end
return n
