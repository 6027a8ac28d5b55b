-- frontier: what a replica keeps of a queue to answer ticket polls without
-- a query (queue.Frontier), in one read. It changes nothing.
--
-- Everyone waiting has a sequence number above the frontier (the last one
-- admitted); the leaver bins (see bins_add) say how many of the numbers
-- between the frontier and a ticket's are empty. The fine bins are read
-- from the frontier's up to a coarse bin's start at least ARGV[1] numbers
-- further, the coarse ones from there to the tail, at most ARGV[2] of them.
-- The bins are usable when they add up to the leavers' set (left) and no
-- draw is placing people: a rolling upgrade that finds leavers from before
-- the bins existed, or a draw in progress, sends every poll to Redis.
--
-- Called by: Store.Frontiers (frontier.go), which FrontierCache.Refresh runs, for the queue-gateway's app.Frontiers and the notification-service's stream.Frontiers
-- KEYS: 1 config, 2 waiting, 3 seq, 4 dispatch, 5 left, 6 leftbins
-- ARGV: 1 fine window (sequence numbers), 2 most coarse bins
-- Reply: {'NOT_FOUND'} or {'OK', state, rate, measured, leaveShare,
-- startsAtMs, generation, last, tail, waiting, firstLeft, fineFrom, {fine},
-- coarseFrom, {coarse}, beyond, usable (1 or 0), shards, lineKey}; numbers
-- as integers or strings (the rates). lineKey ('' for none) is the queue's
-- line key, on line 0 of a queue split into lines: the replica finds a
-- ticket holder's line with it (it is the services' secret, never shown).
local cfg = redis.call('HMGET', KEYS[1], 'state', 'admissionRatePerSec', 'startsAtMs', 'drawPending', 'createdAtMs',
  'shards', 'lineKey')
if not cfg[1] then
  return {'NOT_FOUND'}
end
local now = now_ms()
local figures = admission_figures(KEYS[4], now)
local d = redis.call('HMGET', KEYS[4], 'frontier', 'issuedTotal')
local last = tonumber(d[1] or '0') or 0
local tail = tonumber(redis.call('GET', KEYS[3]) or '0') or 0
local waiting = redis.call('ZCARD', KEYS[2])
local total_left = redis.call('ZCARD', KEYS[5])

local first = math.floor((last + 1) / FINE_BIN)
local first_left = redis.call('ZCOUNT', KEYS[5], '(' .. string.format('%d', last), (first + 1) * FINE_BIN - 1)
local fine_end = math.ceil((last + 1 + tonumber(ARGV[1])) / COARSE_BIN) * COARSE_BIN
local function read_bins(prefix, from, to)
  local names = {}
  for b = from, to - 1 do
    names[#names + 1] = prefix .. string.format('%d', b)
  end
  local counts, sum = {}, 0
  if #names > 0 then
    local got = redis.call('HMGET', KEYS[6], unpack(names))
    for i = 1, #names do
      counts[i] = tonumber(got[i] or '0') or 0
      sum = sum + counts[i]
    end
  end
  return counts, sum
end
-- No bin past the tail's is read: a short line reads a few fields.
local fine, fine_sum = read_bins('f', first, math.min(fine_end / FINE_BIN, math.floor(tail / FINE_BIN) + 1))
local coarse_from = fine_end / COARSE_BIN
local coarse_to = math.max(coarse_from, math.floor(tail / COARSE_BIN) + 1)
local capped = coarse_to - coarse_from > tonumber(ARGV[2])
coarse_to = math.min(coarse_to, coarse_from + tonumber(ARGV[2]))
local coarse, coarse_sum = read_bins('c', coarse_from, coarse_to)

local beyond = total_left - fine_sum - coarse_sum
local usable = cfg[4] ~= '1' and (d[1] ~= false or tonumber(d[2] or '0') == 0)
  and beyond >= 0 and (capped or beyond == 0)
return {'OK', cfg[1], figures.effective or cfg[2], figures[1], figures[2], tonumber(cfg[3] or '0') or 0,
  tonumber(cfg[5] or '0') or 0, last, tail, waiting, first_left, first, fine, coarse_from, coarse, beyond,
  usable and 1 or 0, tonumber(cfg[6] or '1') or 1, (tonumber(cfg[6] or '1') or 1) > 1 and cfg[7] or ''}
