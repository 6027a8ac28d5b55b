-- draw: the leader places a closed pre-queue in drawn order (see schedule in
-- the prelude for how it closes). Three steps, each safe to run twice, all
-- fenced by the leader's epoch:
--
--   announce  writes QueueStarted (the seed's SHA-256, how many were
--             pre-queued) to the outbox before anyone is placed; once.
--   place     gives each named user, in the order given, the next of the
--             sequence numbers reserved for the pre-queue, if they are still
--             pre-queued; a user placed already (a repeat) or gone (left) is
--             skipped, so a new leader that goes on with whoever is left, in
--             the same drawn order, gives the same relative order.
--   finish    once nobody is pre-queued: state DRAWN, and QueueDrawn (the
--             seed, how many were placed, their sequence numbers) to the
--             outbox; once. The numbers reserved for people who left the
--             pre-queue before their turn to be placed are recorded as
--             leavers (left, leftbins), so the frontier caches count those
--             places as empty.
--
-- The caller computes the order (HMAC-SHA256 of each user id keyed with the
-- seed; Redis has no SHA-256) from the seed this script returns.
--
-- A queue split into lines draws each line's pre-queue on the line (the same
-- seed on every line, so one order): lines 1 and up run announce and finish
-- quietly (ARGV 4 = '1': no event), and line 0's events, announced and
-- finished last by the leader, carry the queue's totals (its own counts plus
-- the other lines', ARGV 5 pre-queued and ARGV 6 placed); QueueDrawn's
-- first and last are line 0's numbers.
--
-- Called by: Store.StartDraw, Store.PlaceDrawn, Store.FinishDraw through drawStep (draw.go), for the admission-dispatcher's dispatch.TickStore (ticks.draw, ticks.drawLines, ticks.place)
-- KEYS: 1 config, 2 waiting, 3 prequeue, 4 draw, 5 dispatch, 6 outbox, 7 left,
--       8 leftbins
-- ARGV: 1 epoch, 2 step, 3 queue id; place: 4.. users; announce and finish:
--       4 quiet ('1' or ''), 5 the other lines' pre-queued, 6 the other
--       lines' placed ('' for none)
-- Reply: {'OK', state, seed, still pre-queued, placed so far, pre-queued at
-- the close}; {'STALE', epoch}; {'NOT_FOUND'}.
local current = tonumber(redis.call('HGET', KEYS[5], 'epoch') or '0')
if tonumber(ARGV[1]) ~= current then
  return {'STALE', current}
end
local starts = tonumber(redis.call('HGET', KEYS[1], 'startsAtMs') or '0') or 0
-- One key an EXISTS: a multi-key command on keys missing from a slot
-- being imported is refused differently from a single one.
redis.call('EXISTS', KEYS[7])
redis.call('EXISTS', KEYS[8])
local d = redis.call('HMGET', KEYS[4], 'state', 'seed', 'seedSha256', 'base', 'count', 'next', 'startedAtMs', 'announced')
if not d[1] then
  return {'NOT_FOUND'}
end
local step, q = ARGV[2], ARGV[3]
local base, nxt = tonumber(d[4] or '0'), tonumber(d[6] or '0')
local now = now_ms()

local function answer(state)
  return {'OK', state, d[2], redis.call('ZCARD', KEYS[3]), nxt - base, tonumber(d[5] or '0') or 0}
end
local quiet = step ~= 'place' and ARGV[4] == '1'
local others_pre, others_placed = 0, 0
if step ~= 'place' then
  others_pre, others_placed = tonumber(ARGV[5] or '') or 0, tonumber(ARGV[6] or '') or 0
end
local total_pre = (tonumber(d[5] or '0') or 0) + others_pre

if d[1] ~= 'DRAWING' then
  return answer(d[1])
end
local sha = d[3]

if step == 'announce' then
  if not d[8] then
    if not quiet then
      emit(KEYS[6], {'type', 'QueueStarted', 'eid', 'started.' .. string.sub(sha, 1, 32), 'q', q,
        'starts', (starts > 0 and starts) or d[7], 'sha', sha, 'pre', total_pre, 'at', d[7]})
    end
    redis.call('HSET', KEYS[4], 'announced', 1)
  end
  return answer('DRAWING')
end

if step == 'place' then
  for i = 4, #ARGV do
    if redis.call('ZREM', KEYS[3], ARGV[i]) == 1 then
      nxt = nxt + 1
      redis.call('ZADD', KEYS[2], nxt, ARGV[i])
    end
  end
  redis.call('HSET', KEYS[4], 'next', nxt)
  return answer('DRAWING')
end

if step == 'finish' then
  if redis.call('ZCARD', KEYS[3]) > 0 then
    return answer('DRAWING')
  end
  local holes = {}
  for seq = nxt + 1, base + tonumber(d[5] or '0') do
    redis.call('ZADD', KEYS[7], seq, seq .. ':')
    holes[#holes + 1] = seq
  end
  bins_add(KEYS[8], holes, 1)
  redis.call('HSET', KEYS[4], 'state', 'DRAWN', 'drawnAtMs', now)
  redis.call('HSET', KEYS[1], 'drawPending', 0)
  if not quiet then
    emit(KEYS[6], {'type', 'QueueDrawn', 'eid', 'drawn.' .. string.sub(sha, 1, 32), 'q', q,
      'seed', d[2], 'sha', sha, 'pre', total_pre, 'placed', nxt - base + others_placed,
      'first', base + 1, 'last', nxt, 'at', now})
  end
  return answer('DRAWN')
end
return redis.error_reply('draw: unknown step ' .. tostring(step))
