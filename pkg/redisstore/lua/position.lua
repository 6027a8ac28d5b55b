-- position: where a user stands, in one round trip.
-- It changes nothing: the pre-queue is closed at the start by enter or the
-- dispatcher's tick, never here.
-- Called by: Store.Position (store.go) and Store.PositionMany (many.go), for the queue-gateway's app.Store (Service.position) and the notification-service's stream.Positions
-- KEYS: 1 config, 2 waiting, 3 token:<user> (read only for a token an earlier
--       version issued: live_token), 4 status:<user>, 5 dispatch,
--       6 prequeue, 7 draw
-- ARGV: 1 user id, 2 '1' to have a WAITING reply carry the place's sequence
--       number and the queue's generation (for a ticket), '' not to;
--       3 the line count the caller routed by ('' for no check; see enter)
local cfg = redis.call('HMGET', KEYS[1], 'state', 'admissionRatePerSec', 'startsAtMs', 'drawPending', 'createdAtMs',
  'awayAfterSeconds')
if not cfg[1] then
  return {'NOT_FOUND'}
end
local wrong_line = line_check(KEYS[1], ARGV[3] or '')
if wrong_line then
  return wrong_line
end
local now = now_ms()
local measured = admission_figures(KEYS[5], now)
local total = redis.call('ZCARD', KEYS[2])
local starts, drawing = schedule(cfg[3], cfg[4], KEYS[7], KEYS[6], nil, now)
with_schedule(measured, starts, drawing, KEYS[6], now)

local rank = redis.call('ZRANK', KEYS[2], ARGV[1])
if rank then
  local seq = nil
  if ARGV[2] == '1' then
    seq = redis.call('ZSCORE', KEYS[2], ARGV[1])
  end
  return reply('WAITING', cfg[1], cfg[2], measured, total, rank + 1, nil, seq, cfg[5])
end
local tok, marker = live_token(KEYS[4], KEYS[3], now)
if tok then
  return reply('ADMITTED', cfg[1], cfg[2], measured, total, 0, tok)
end
-- Away (presence): still their place, which their next sighting (this
-- poll's, batched) gives back: told where it stands among the present.
local away = presence_flagged(cfg[6], KEYS[5]) and redis.call('ZSCORE', string.sub(KEYS[1], 1, #KEYS[1] - #'config') .. 'away', ARGV[1])
if away then
  local seq = nil
  if ARGV[2] == '1' then
    seq = away
  end
  local ahead = redis.call('ZCOUNT', KEYS[2], '-inf', '(' .. away)
  return reply('WAITING', cfg[1], cfg[2], measured, total, ahead + 1, nil, seq, cfg[5])
end
if drawing and drawing ~= 'DRAWN' and redis.call('ZSCORE', KEYS[6], ARGV[1]) then
  return reply('PRE_QUEUE', cfg[1], cfg[2], measured, total, 0)
end
local status = marker_state(marker)
if status == 'ORDERED' then
  return reply('ORDERED', cfg[1], cfg[2], measured, total, 0)
elseif status == 'ORDERING' then
  return reply('ORDERING', cfg[1], cfg[2], measured, total, 0)
elseif status == 'ABANDONED' then
  -- Away past the grace (presence): out of the line; entering again goes
  -- to the back.
  return reply('ABANDONED', cfg[1], cfg[2], measured, total, 0)
elseif status then
  -- A token was issued (or restored) and is gone without an order.
  return reply('EXPIRED', cfg[1], cfg[2], measured, total, 0)
end
return reply('NOT_IN_QUEUE', cfg[1], cfg[2], measured, total, 0)
