-- check: the order path's cheap gate, read-only. Before any limit is
-- charged or the order database is touched, the order-service asks whether
-- the presented secret is this user's entry token for this queue. consume
-- stays the authority; this only sorts requests:
--   VALID       the token is here, matches, is active and unexpired;
--   NOT_ACTIVE  it matches but activates in <ms>;
--   SPENT       it matches the token this user last consumed in this queue
--               (the holder's retry of an order: it may replay a stored
--               answer, nothing more);
--   INVALID     anything else.
-- Called by: Store.CheckToken (orders.go), for the order-service's order.Tokens (Service.Screen)
-- KEYS: 1 token:<user> (a token an earlier version issued: live_token),
--       2 spent:<user>, 3 status:<user>
-- ARGV: 1 presented secret
local now = now_ms()
local tok = live_token(KEYS[3], KEYS[1], now)
if tok and tok[1] == ARGV[1] then
  local wait = tonumber(tok[3]) - now
  if wait > 0 then
    return {'NOT_ACTIVE', wait}
  end
  return {'VALID'}
end
if redis.call('GET', KEYS[2]) == ARGV[1] then
  return {'SPENT'}
end
return {'INVALID'}
