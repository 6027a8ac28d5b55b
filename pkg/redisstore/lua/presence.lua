-- presence: a replica's sightings of people of one line (those who polled,
-- entered or kept an event stream open), sent once a second in one call.
-- A person waiting is seen now (their seen time only moves forward); an
-- away person comes back to their place (come_back, in the prelude): one
-- whose place admission passed while they were away is the next admitted,
-- within the grace, which the tick enforces by removing them once it is
-- over. Anyone else (admitted, gone, entered before presence was on) is
-- not tracked and nothing is written for them. The batch also marks the
-- line's sightings as arriving (presenceMs): without them the tick skips
-- nobody (see PRESENCE_STALE_MS). The first batch after a gap (none for
-- PRESENCE_STALE_MS: every replica cut off, Redis down, a failover to a
-- replica that lacks the last batches) starts a new run of sightings
-- (presenceSinceMs): the tick marks nobody away until the run is
-- awayAfterSeconds old, so everyone present has been seen in it.
-- Safe to run twice: a repeat sees the same people a moment later.
-- Called by: Store.Sighted (presence.go), for the queue-gateway's app.Presence and the notification-service's stream.Presence
-- KEYS: 1 config, 2 waiting, 3 dispatch
-- ARGV: 1 key prefix "wr:{q}:" (the line's), 2.. user ids (at most 1,000)
-- Reply: {seen, came back}, or {'NOT_FOUND'}
local cfg = redis.call('HMGET', KEYS[1], 'state', 'awayAfterSeconds')
if not cfg[1] then
  return {'NOT_FOUND'}
end
if (tonumber(cfg[2] or '0') or 0) <= 0 or cfg[1] == 'CLOSED' or #ARGV < 2 then
  return {0, 0}
end
local prefix = ARGV[1]
presence_reads(prefix)
local users = {}
for i = 2, #ARGV do
  users[#users + 1] = ARGV[i]
end
local away = redis.call('ZMSCORE', prefix .. 'away', unpack(users))
local now = now_ms()
local seen, back = 0, 0
for i, user in ipairs(users) do
  if away[i] then
    back = back + come_back(prefix, KEYS[2], KEYS[3], user, tonumber(away[i]), now)
  else
    -- CH counts a later time; a sighting in the same millisecond as the
    -- last one changes nothing but is a sighting all the same.
    local moved = redis.call('ZADD', prefix .. 'seen', 'XX', 'GT', 'CH', now, user)
    if moved == 1 or redis.call('ZSCORE', prefix .. 'seen', user) then
      seen = seen + 1
    end
  end
end
local run = redis.call('HMGET', KEYS[3], 'presenceMs', 'presenceSinceMs')
redis.call('HSET', KEYS[3], 'presenceMs', now)
if not run[2] or now - (tonumber(run[1] or '0') or 0) > PRESENCE_STALE_MS then
  redis.call('HSET', KEYS[3], 'presenceSinceMs', now)
end
return {seen, back}
