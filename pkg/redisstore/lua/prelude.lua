-- Shared by every script. Time comes from the server, never from the caller.
local function now_ms()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end

-- The dispatcher's measured admission rate, if it measured one in the last
-- five seconds; "0" otherwise (the caller then uses the configured rate).
local function measured_rate(dispatch_key, now)
  local d = redis.call('HMGET', dispatch_key, 'measuredRate', 'lastTickMs')
  if d[1] and d[2] and now - tonumber(d[2]) <= 5000 then
    return d[1]
  end
  return '0'
end

-- Reply layout shared with standingReply in Go:
-- {outcome, queueState, configuredRate, measuredRate, total, position,
--  token, tokenId, activateAt, expiresAt}
local function reply(outcome, cfg_state, cfg_rate, measured, total, position, tok)
  local r = {outcome, cfg_state, cfg_rate, measured, total, position}
  if tok then
    r[7], r[8], r[9], r[10] = tok[1], tok[2], tok[3], tok[4]
  end
  return r
end

-- Status markers are "<STATE>:<tokenId>[:<orderId>]"; the state decides what
-- a user is told, the ids make every transition idempotent.
local function marker_state(m)
  if not m then
    return nil
  end
  local i = string.find(m, ':', 1, true)
  if i then
    return string.sub(m, 1, i - 1)
  end
  return m
end

-- Appends one event to the queue's outbox stream, in the same script (and so
-- the same atomic step) as the state change it reports.
local function emit(outbox, fields)
  redis.call('XADD', outbox, '*', unpack(fields))
end

-- Splits "a|b|c" into {'a', 'b', 'c'}.
local function fields(s)
  local f = {}
  for part in string.gmatch(s, '[^|]+') do
    f[#f + 1] = part
  end
  return f
end
