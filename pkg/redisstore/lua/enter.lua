-- enter: give a user a place in line, or their token back, or say why not.
--
-- A queue with enterChallenge PROOF_OF_WORK gives a new place only for a
-- solved challenge the gateway checked (signature, work): issued at the
-- queue's current difficulty or above, unexpired by this server's clock,
-- and never used before, which is recorded under the challenge's id in the
-- same step. Anyone already in line (or holding a token) gets their
-- standing back without one, so a refresh or a retried enter never needs a
-- second solution and never burns one.
--
-- A queue with a start time that has not come pre-queues new entrants
-- instead (PRE_QUEUE): the dispatcher places them in a random drawn order at
-- the start. The first enter after the start closes the pre-queue if the
-- dispatcher has not yet (schedule, in the prelude), so nobody who comes
-- after the start is drawn with those who came before it.
--
-- A WAITING reply carries the place's sequence number and the queue's
-- generation (createdAtMs): the gateway signs them into the entrant's ticket.
--
-- Every line records when each person got their place (entered: user ->
-- Redis TIME in µs): the admission measures their wait from it (history),
-- and the leader of a queue split into lines admits across the lines in
-- that order (queue/arrival.go). A new place or pre-queue entry counts in
-- the minute's arrivals (minute_add, in the prelude).
--
-- With presence on (awayAfterSeconds), an enter is a sign of life: the
-- entrant is seen now, and one who was away comes back to their place
-- (come_back), not to the back of the line.
--
-- Called by: Store.EnterWithProof and Store.Enter (store.go), for the queue-gateway's app.Store (Service.enter)
-- KEYS: 1 config, 2 waiting, 3 seq, 4 token:<user> (read only for a token
--       an earlier version issued: live_token), 5 status:<user>, 6 dispatch,
--       7 pow:<challenge id> (pow: with no id when none was shown), 8 prequeue,
--       9 draw, 10 traces, 11 entered
-- A queue split into sub-lines runs this on the user's line (its keys,
-- its config copy): the caller names the line count it routed by (ARGV 5),
-- and a wrong one is answered {'RESHARD', count} (see line_check); the cap
-- is this line's share of the queue's.
--
-- ARGV: 1 user id, 2 challenge id or '', 3 its difficulty bits, 4 its expiry (ms),
--       5 the line count the caller routed by ('' for no check),
--       6 the traceparent of a sampled enter ('' for none): kept in traces
--       for a new place or pre-queue place, for the admission to link to,
--       7 '1' when the caller waits for replicas: an answer from a place or
--       token someone already has writes acked's no-op (dispatch's epoch + 0)
local cfg = redis.call('HMGET', KEYS[1], 'state', 'admissionRatePerSec', 'maxQueueSize', 'maxWaitSeconds',
  'enterChallenge', 'powDifficultyBits', 'startsAtMs', 'drawPending', 'createdAtMs', 'shards', 'awayAfterSeconds')
if not cfg[1] then
  return {'NOT_FOUND'}
end
local wrong_line = line_check(KEYS[1], ARGV[5] or '')
if wrong_line then
  return wrong_line
end
if ARGV[6] and ARGV[6] ~= '' then
  -- Read before any write (a slot migrating fails the script here).
  redis.call('EXISTS', KEYS[10])
end
redis.call('EXISTS', KEYS[11])
-- Presence: its keys are read before any write.
local tracked = (tonumber(cfg[11] or '0') or 0) > 0
local prefix = string.sub(KEYS[1], 1, #KEYS[1] - #'config')
redis.call('EXISTS', prefix .. 'minutes')
local away = nil
if presence_flagged(cfg[11], KEYS[6]) then
  presence_reads(prefix)
  away = redis.call('ZSCORE', prefix .. 'away', ARGV[1])
end
local now = now_ms()
local measured = admission_figures(KEYS[6], now)
local total = redis.call('ZCARD', KEYS[2])
local starts, drawing = 0, nil
if cfg[1] ~= 'CLOSED' then
  starts, drawing = schedule(cfg[7], cfg[8], KEYS[9], KEYS[8], KEYS[3], now)
end
with_schedule(measured, starts, drawing, KEYS[8], now)
local prequeued = measured[5] or 0

-- A token holder gets the token back, even from a closed queue: it is theirs.
local tok, marker = live_token(KEYS[5], KEYS[4], now)
if tok then
  acked(ARGV[7], KEYS[6], 'epoch')
  return reply('ADMITTED', cfg[1], cfg[2], measured, total, 0, tok)
end
-- An order with the token is in flight: the user is through, not back in
-- line (a new place now would give them a second token).
if marker_state(marker) == 'ORDERING' then
  acked(ARGV[7], KEYS[6], 'epoch')
  return reply('ORDERING', cfg[1], cfg[2], measured, total, 0)
end
if cfg[1] == 'CLOSED' then
  return reply('CLOSED', cfg[1], cfg[2], measured, total, 0)
end

-- Away: back at their place.
if away then
  come_back(prefix, KEYS[2], KEYS[6], ARGV[1], tonumber(away), now)
  total = total + 1
end

-- Already waiting: the same place. A refresh never moves anyone back.
local rank = redis.call('ZRANK', KEYS[2], ARGV[1])
if rank then
  if tracked then
    redis.call('ZADD', prefix .. 'seen', 'XX', 'GT', now, ARGV[1])
  end
  acked(ARGV[7], KEYS[6], 'epoch')
  return reply('WAITING', cfg[1], cfg[2], measured, total, rank + 1, nil, redis.call('ZSCORE', KEYS[2], ARGV[1]), cfg[9])
end

-- Pre-queued and not placed yet: still waiting for the start, or for the
-- draw to place them.
if (drawing == 'SCHEDULED' or drawing == 'DRAWING') and redis.call('ZSCORE', KEYS[8], ARGV[1]) then
  acked(ARGV[7], KEYS[6], 'epoch')
  return reply('PRE_QUEUE', cfg[1], cfg[2], measured, total, 0)
end

-- The cap counts the pre-queued: they all get a place at the start.
local cap = line_share(KEYS[1], math.min(tonumber(cfg[3]), math.floor(tonumber(cfg[4]) * tonumber(cfg[2]))))
if total + prequeued >= cap then
  return reply('FULL', cfg[1], cfg[2], measured, total, 0)
end

if cfg[5] == 'PROOF_OF_WORK' then
  if ARGV[2] == '' then
    return reply('CHALLENGE_REQUIRED', cfg[1], cfg[2], measured, total, 0)
  end
  if tonumber(ARGV[3]) < tonumber(cfg[6] or '16') or now >= tonumber(ARGV[4])
    or not redis.call('SET', KEYS[7], '1', 'NX', 'PXAT', ARGV[4]) then
    return reply('CHALLENGE_FAILED', cfg[1], cfg[2], measured, total, 0)
  end
end

-- A sampled enter's trace, kept for the admission's link (its key was
-- read at the start, like every other).
local function keep_trace()
  if ARGV[6] and ARGV[6] ~= '' then
    redis.call('HSET', KEYS[10], ARGV[1], ARGV[6])
  end
end

if drawing == 'SCHEDULED' then
  -- Before the start: when one came does not matter, the draw decides.
  -- The score is the time of entry, for the record only.
  keep_trace()
  minute_add(prefix, 'arr', redis.call('ZADD', KEYS[8], 'NX', now, ARGV[1]), now)
  if tracked then
    redis.call('ZADD', prefix .. 'seen', now, ARGV[1])
  end
  measured[5] = prequeued + 1
  return reply('PRE_QUEUE', cfg[1], cfg[2], measured, total, 0)
end

-- The score is a sequence number, not a clock: two gateways with skewed
-- clocks cannot reorder the line. A new score is the largest, so the new
-- member's rank is the old size.
keep_trace()
local seq = redis.call('INCR', KEYS[3])
redis.call('ZADD', KEYS[2], 'NX', seq, ARGV[1])
if tracked then
  redis.call('ZADD', prefix .. 'seen', now, ARGV[1])
end
redis.call('HSET', KEYS[11], ARGV[1], now_us())
minute_add(prefix, 'arr', 1, now)
return reply('WAITING', cfg[1], cfg[2], measured, total + 1, total + 1, nil, seq, cfg[9])
