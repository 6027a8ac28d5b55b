-- overdue: the reaper's work list, judged by Redis TIME (the clock that set
-- the deadlines), never by the caller's. Read-only.
-- Called by: Store.Overdue (orders.go), for the order-service's order.Tokens (Service.Reap)
-- KEYS: 1 inflight
-- ARGV: 1 limit, 2 key prefix "wr:{q}:"
-- Reply: flat list of (member, deadline, consumed data or false)
local now = now_ms()
local zs = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', now, 'WITHSCORES', 'LIMIT', 0, tonumber(ARGV[1]))
local out = {}
for i = 1, #zs, 2 do
  local member = zs[i]
  local user = string.sub(member, string.find(member, ':', 1, true) + 1)
  out[#out + 1] = member
  out[#out + 1] = zs[i + 1]
  out[#out + 1] = redis.call('GET', ARGV[2] .. 'consumed:' .. user)
end
return out
