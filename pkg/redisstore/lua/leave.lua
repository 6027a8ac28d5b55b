-- leave: take a user out of the line. A person who was waiting is counted
-- in leftTotal and kept in left under their place's sequence number until
-- the admission of a later place resolves their cohort (issue): the wait
-- estimates discount the people ahead by the share of a resolved cohort
-- that left, which the leavers of the unresolved part would inflate (they
-- are out before the stayers of their cohort are in).
-- A pre-queued person just leaves the pre-queue: they had no place yet, so
-- they are not a leaver of anyone's cohort.
-- The leaver is also counted in the leftbins hash (see bins_add), where the
-- replicas' frontier caches learn how many of the places ahead of a ticket
-- are empty.
-- The leaver's enter time (entered) goes with them. A leaver of the line
-- counts in the minute's leaves (minute_add, in the prelude).
-- An away person (presence, see mark_away) leaves the same way: their place
-- is already a leaver's, or was passed.
-- Called by: Store.Leave (store.go), for the queue-gateway's app.Store (Service.Leave)
-- KEYS: 1 config, 2 waiting, 3 dispatch, 4 left, 5 prequeue, 6 leftbins, 7 traces,
--       8 entered
-- ARGV: 1 user id, 2 the line count the caller routed by ('' for no check;
--       see enter): a wrong one is answered -2 - <the count>, a line being
--       resharded -2
if redis.call('EXISTS', KEYS[1]) == 0 then
  return -1
end
local wrong_line = line_check(KEYS[1], ARGV[2] or '')
if wrong_line then
  if wrong_line[1] == 'RESHARDING' then
    return -2
  end
  return -2 - wrong_line[2]
end
local score = redis.call('ZSCORE', KEYS[2], ARGV[1])
local prefix = string.sub(KEYS[1], 1, #KEYS[1] - #'config')
local flagged = presence_flagged(redis.call('HGET', KEYS[1], 'awayAfterSeconds'), KEYS[3])
local away = nil
if flagged then
  away = redis.call('ZSCORE', prefix .. 'away', ARGV[1])
  redis.call('EXISTS', prefix .. 'seen')
  redis.call('EXISTS', prefix .. 'skipped')
end
redis.call('EXISTS', KEYS[8])
redis.call('EXISTS', prefix .. 'minutes')
local now = now_ms()
redis.call('HDEL', KEYS[7], ARGV[1])
redis.call('HDEL', KEYS[8], ARGV[1])
if flagged then
  redis.call('ZREM', prefix .. 'seen', ARGV[1])
end
if away then
  redis.call('ZREM', prefix .. 'away', ARGV[1])
  redis.call('ZREM', prefix .. 'skipped', ARGV[1])
  redis.call('HINCRBY', KEYS[3], 'leftTotal', 1)
  minute_add(prefix, 'left', 1, now)
  return 1
end
if not score then
  return redis.call('ZREM', KEYS[5], ARGV[1])
end
redis.call('EXISTS', KEYS[6])
-- A sequence number, whatever type the protocol gave the score.
local seq = string.format('%d', tonumber(score))
redis.call('ZREM', KEYS[2], ARGV[1])
redis.call('ZADD', KEYS[4], seq, seq .. ':' .. ARGV[1])
bins_add(KEYS[6], {tonumber(seq)}, 1)
redis.call('HINCRBY', KEYS[3], 'leftTotal', 1)
minute_add(prefix, 'left', 1, now)
return 1
