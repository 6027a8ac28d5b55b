-- push: keep a user's Web Push subscriptions in a queue, a few devices at
-- most: save one (replacing the same id, evicting the oldest past the
-- limit) or remove one.
-- Called by: Store.SavePush, Store.DropPush (push.go), for the
-- notification-service's push.Service (PUT and DELETE
-- /api/v1/queues/{q}/push)
-- KEYS: 1 config, 2 push:<user>
-- ARGV: 1 'save' or 'drop', 2 subscription id,
--       save: 3 now (Unix ms), 4 the subscription's JSON, 5 lifetime (ms),
--             6 the most subscriptions a user keeps
-- Returns -1 when the queue does not exist; save: the number of
-- subscriptions evicted to make room; drop: 1 when there was one, else 0.
if redis.call('EXISTS', KEYS[1]) == 0 then
  return -1
end
if ARGV[1] == 'drop' then
  return redis.call('HDEL', KEYS[2], ARGV[2])
end
redis.call('HSET', KEYS[2], ARGV[2], ARGV[3] .. '|' .. ARGV[4])
redis.call('PEXPIRE', KEYS[2], ARGV[5])
local most = tonumber(ARGV[6])
local evicted = 0
while redis.call('HLEN', KEYS[2]) > most do
  local all = redis.call('HGETALL', KEYS[2])
  local oldest, at = nil, nil
  for i = 1, #all, 2 do
    local saved = tonumber(string.match(all[i + 1], '^(%d+)|')) or 0
    if all[i] ~= ARGV[2] and (at == nil or saved < at) then
      oldest, at = all[i], saved
    end
  end
  redis.call('HDEL', KEYS[2], oldest)
  evicted = evicted + 1
end
return evicted
