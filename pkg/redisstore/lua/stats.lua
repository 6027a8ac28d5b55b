-- stats: a queue's knobs and live figures.
-- Called by: Store.Config through lineConfig (config.go), for the queue-gateway's app.Store (Service.Queue, Service.PublicQueue) and the admission-dispatcher's dispatch.TickStore (ticks.tick)
-- KEYS: 1 config, 2 waiting, 3 active, 4 dispatch, 5 draw, 6 prequeue
-- The draw's seed is only answered once the draw is done.
local cfg = redis.call('HGETALL', KEYS[1])
if #cfg == 0 then
  return {'NOT_FOUND'}
end
local now = now_ms()
local waiting = redis.call('ZCARD', KEYS[2])
-- Slots whose expiry passed are free even before the dispatcher prunes them.
local active = redis.call('ZCOUNT', KEYS[3], '(' .. now, '+inf')
local d = redis.call('HMGET', KEYS[4], 'issuedTotal', 'heldReason', 'effectiveRate', 'rateReason', 'awayTotal',
  'returnedTotal', 'abandonedTotal', 'orderPath', 'orderPathMs')
-- Presence (see mark_away): away now (out of the line, place kept), of them
-- passed over (in their grace), and the counters.
local prefix = string.sub(KEYS[1], 1, #KEYS[1] - #'config')
local presence = {0, 0, d[5] or '0', d[6] or '0', d[7] or '0'}
if presence_flagged(redis.call('HGET', KEYS[1], 'awayAfterSeconds'), KEYS[4]) then
  presence[1], presence[2] = redis.call('ZCARD', prefix .. 'away'), redis.call('ZCARD', prefix .. 'skipped')
end
local draw = {}
local dr = redis.call('HMGET', KEYS[5], 'state', 'seedSha256', 'seed', 'count', 'base', 'next', 'startedAtMs', 'drawnAtMs')
if dr[1] then
  local seed, pre = '', dr[4] or '0'
  if dr[1] == 'DRAWN' then
    seed = dr[3]
  end
  if dr[1] == 'SCHEDULED' then
    pre = redis.call('ZCARD', KEYS[6])
  end
  draw = {dr[1], dr[2], seed, pre, (tonumber(dr[6] or '0') or 0) - (tonumber(dr[5] or '0') or 0),
    dr[7] or '0', dr[8] or '0'}
end
-- The order path's health as the leader last recorded it, if within 5 s
-- (queue.OrderPathFresh): "<p95 ms>,<attempts>,<created>,<unavailable>,
-- <outbox backlog>,<recorded at ms>", or ''.
local path = ''
if d[8] and now - (tonumber(d[9] or '0') or 0) <= 5000 then
  path = d[8] .. ',' .. d[9]
end
return {'OK', cfg, waiting, active, d[1] or '0', measured_rate(KEYS[4], now), d[2] or '', draw, d[3] or '', d[4] or '',
  presence, path}
