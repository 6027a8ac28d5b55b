-- issue: the leader's tick. Prunes expired slots, adds rate x elapsed to the
-- admission credit, pops the head of the line and gives each person a token,
-- a status marker and a slot, and the tick's admitted one TokensIssued outbox
-- entry. One script: a crash leaves all of it or none of it.
--
-- Safe to run twice, and never late. The tick carries an id, a number that
-- only grows within the leader's epoch; the dispatch hash keeps the id, its
-- epoch and the reply of the last applied tick. A repeat (a client that
-- timed out and sent the same EVALSHA again) gets that reply and changes
-- nothing. A tick older than the last applied one of the same epoch (a
-- request held on the way, arriving after a later tick ran) is refused,
-- {'LATE', last id}, and changes nothing: applying it would hand its
-- grants, which a retry of it may already have handed out, to the next
-- people in line.
--
-- On a cluster (ARGV 15) every key is read before the first write.
-- The per-user key (status:<user>, which holds the token: token_marker)
-- is built from the queue's prefix, which carries the hash tag, so it
-- shares the queue's slot; while that slot is migrating a key this node
-- does not hold makes the read fail, and the script stops before it has
-- changed anything (the caller retries the tick). A Redis without slots
-- (one node, a Sentinel set) has no slot to move, and is spared that read
-- a person.
--
-- A queue whose start time came has its pre-queue closed here, if an enter
-- has not done it first (schedule, in the prelude); while the leader places
-- the pre-queued people in drawn order (draw.lua), the tick admits nobody
-- (HELD, DRAW), so nobody who came after the start is admitted before them.
--
-- An ADAPTIVE queue admits at the rate its leader's controller proposes
-- (ARGV 7, with the reason), kept within the queue's range and recorded
-- as effectiveRate / rateReason in the dispatch hash, where the gateway's
-- estimates and views read it; without a proposal (a new leader's first
-- tick) the recorded one stands. A FIXED queue admits at its configured
-- rate and has no effective rate recorded.
--
-- A line of a queue split into lines (queue/lines.go) is ticked like a
-- queue of its own, at its share of the queue's rate (ARGV 9: its part of
-- the queue's earliest arrivals, from the leader) and with its share of
-- maxActive (line_share); the frontier it announces is the line's (its
-- line id, "<q>:<i>"), the events it writes name the queue. Such a line's
-- tick also reports the enter times (entered, kept by enter.lua) of the
-- first ARGV 12 people still waiting after it, for the leader to merge
-- across the lines (queue/arrival.go), and drops the admitted people's.
--
-- A queue with presence on (awayAfterSeconds; docs/DESIGN.md, "Presence")
-- has its line swept here first, while its replicas' sightings arrive:
-- people not seen for awayAfterSeconds go out of the line into away
-- (mark_away), and the head of the line is checked too, so the batch is
-- made of present people only and the rate is kept. Away people whose
-- place the admission passes are skipped (when noted); those skipped
-- longer than awayGraceSeconds are removed for good: an ABANDONED marker
-- and a UserAbandoned event. A queue whose knob went back to 0 has its
-- away people put back at their places, a batch a tick.
--
-- Called by: Store.IssueAll (batch.go), for the admission-dispatcher's dispatch.TickStore (ticks.tick)
-- KEYS: 1 config, 2 waiting, 3 active, 4 dispatch, 5 outbox, 6 seq, 7 inflight, 8 lock
-- (prequeue and draw, built from the prefix, are touched only while a draw
-- is pending: see schedule)
-- ARGV: 1 epoch, 2 key prefix "wr:{q}:", 3 tick ms, 4 queue id, 5 tick id,
--       6 outbox bound (0: none), 7 proposed rate ('' for none), 8 its reason,
--       9 the line's share of the rate ('' for all of it),
--       10 traceparent and 11 tracestate of the tick ('' for none), which
--       the events it writes carry,
--       12 how many enter times of the people still waiting to report (a
--       line of a queue split into lines; 0 for none),
--       13 '1' to send the line's finished minutes (the history) to the
--       outbox ('' leaves them in Redis, dropped with the queue: a caller
--       that relays no events),
--       14 the order path's health from the leader's reports ("<p95 ms>,
--       <attempts>,<created>,<unavailable>,<outbox backlog>", '' for none),
--       recorded as orderPath / orderPathMs for the admin view,
--       15 '1' on a Redis Cluster (per-user keys read before any write),
--       16.. (secret, token id) pairs made by the caller, one per possible admission
-- Reply: {outcome, issued, expired, waiting after, held reason, rate, mode,
-- min rate, max rate, target latency ms, config version, interval ms,
-- traceparents[, enter times]}, outcome OK | PAUSED | HELD; or
--
-- Interval is the time since the last tick that admitted or was paused
-- (any leader's; 0 for the first): a tick held (outbox backlog, a draw)
-- or missed (no leader) makes the next one's interval long. It is the
-- admission-punctuality figure. Traceparents are those kept for the people
-- admitted (enter.lua keeps one for a sampled enter), for the tick span to
-- link to. Enter times (µs, 0 for a person without one), only on an OK
-- reply of a line that keeps them, are not part of the recorded reply: a
-- repeated tick reports none, and the leader keeps the ones it has.
--
-- {'STALE', epoch}, {'LATE', last tick id}, {'NOT_FOUND'}, {'GONE'}.
local epoch = tonumber(ARGV[1])
-- The dispatch hash, read once: fencing, the last applied tick, the credit.
local d = redis.call('HMGET', KEYS[4], 'epoch', 'tickId', 'tickReply', 'credit', 'lastTickMs', 'measuredRate',
  'effectiveRate', 'punctualMs', 'tickEpoch', 'presenceMs', 'frontier', 'presenceKeys', 'presenceSinceMs', 'minuteMark',
  'minuteSends')
local current = tonumber(d[1] or '0')
if epoch ~= current then
  return {'STALE', current}
end
if d[2] == ARGV[5] and d[3] then
  return cjson.decode(d[3])
end
local tick_no, last_no = tonumber(ARGV[5]), tonumber(d[2] or '')
if tonumber(d[9] or '') == epoch and last_no and (not tick_no or tick_no < last_no) then
  return {'LATE', d[2]}
end
local cfg = redis.call('HMGET', KEYS[1], 'state', 'admissionRatePerSec', 'maxActive', 'tokenTtlSeconds', 'activationSpreadMs',
  'startsAtMs', 'admissionMode', 'minAdmissionRatePerSec', 'maxAdmissionRatePerSec', 'targetOrderLatencyMs', 'drawPending',
  'version', 'shards', 'awayAfterSeconds', 'awayGraceSeconds')
if not cfg[1] then
  return {'NOT_FOUND'}
end
local prefix, tick_ms, q, tick_id = ARGV[2], tonumber(ARGV[3]), ARGV[4], ARGV[5]
-- The per-user status markers (a held token is in its marker: token_marker).
local status_prefix = prefix .. 'status:'
local bound = tonumber(ARGV[6])
-- A line of a queue split into lines reports its next people's enter times.
local split = (tonumber(cfg[13] or '1') or 1) > 1
local want = split and (tonumber(ARGV[12]) or 0) or 0
local now = now_ms()
local interval = d[8] and math.max(0, now - tonumber(d[8])) or 0

-- Presence: tracked while the knob is on; swept while sightings arrive
-- and no draw is pending (the pre-queued are placed first).
local away_ms = (tonumber(cfg[14] or '0') or 0) * 1000
local grace_ms = (tonumber(cfg[15] or '0') or 0) * 1000
local frontier = tonumber(d[11] or '0') or 0
local tracked = away_ms > 0
-- presenceKeys (dispatch hash): presence keys may exist, set by every tick
-- with presence on, cleared once the knob went back to 0 and they are
-- gone. A queue that never had presence reads none of them, so its ticks
-- keep working on a slot that is migrating.
local flagged = tracked or d[12] == '1'
-- Sweeping also waits until the line's sightings have arrived without a
-- gap for awayAfterSeconds (presenceSinceMs, set by presence.lua): after
-- an outage, or a failover to a replica that lacks the last batches,
-- everyone present is seen again before anyone is taken for away.
local presence = tracked and cfg[11] ~= '1' and cfg[1] ~= 'CLOSED'
  and now - (tonumber(d[10] or '0') or 0) <= PRESENCE_STALE_MS
  and now - (tonumber(d[13] or '') or now) >= away_ms
-- At most this many people are swept, abandoned or put back a tick, and
-- looked past at the head of the line.
local SWEEP = 500

-- The rate this tick admits at.
local rate = tonumber(cfg[2])
local adaptive = cfg[7] == 'ADAPTIVE' and cfg[8] and cfg[9]
local reason = ARGV[8]
if adaptive then
  local proposed = tonumber(ARGV[7])
  if not proposed then
    reason = false
  end
  rate = math.min(math.max(proposed or tonumber(d[7] or '') or rate, tonumber(cfg[8])), tonumber(cfg[9]))
end
-- This line's part of it: what its credit, batch cap and measured rate
-- count in. The replies and effectiveRate keep the queue's rate.
local line_rate = rate * (tonumber(ARGV[9]) or 1)

-- Records the reply of this tick next to its id, then returns it. Every
-- reply but the errors ends with the rate and the queue's admission mode.
local function done(r, fields)
  for i = #r + 1, 4 do
    r[i] = 0
  end
  r[5] = r[5] or ''
  r[6], r[7], r[8], r[9], r[10] = tostring(rate), cfg[7] or 'FIXED', cfg[8] or '0', cfg[9] or '0', cfg[10] or '0'
  r[11] = cfg[12] or '0'
  r[12] = interval
  r[13] = r[13] or {}
  if tracked and d[12] ~= '1' then
    fields[#fields + 1], fields[#fields + 2] = 'presenceKeys', 1
  end
  if ARGV[14] and ARGV[14] ~= '' then
    fields[#fields + 1], fields[#fields + 2] = 'orderPath', ARGV[14]
    fields[#fields + 1], fields[#fields + 2] = 'orderPathMs', now
  end
  if adaptive then
    fields[#fields + 1], fields[#fields + 2] = 'effectiveRate', rate
    if reason then
      fields[#fields + 1], fields[#fields + 2] = 'rateReason', reason
    end
  elseif d[7] then
    -- Once, when the queue leaves ADAPTIVE: not a write on every tick.
    redis.call('HDEL', KEYS[4], 'effectiveRate', 'rateReason')
  end
  redis.call('HSET', KEYS[4], 'tickId', tick_id, 'tickEpoch', epoch, 'tickReply', cjson.encode(r), unpack(fields))
  return r
end

-- A closed queue whose last slot, order and event are gone is deleted: its
-- keys, here; its registration in wr:queues, by the caller (another slot).
-- The epoch stays an hour, so a re-created queue keeps fencing old leaders.
if cfg[1] == 'CLOSED' and redis.call('ZCARD', KEYS[2]) == 0 and redis.call('ZCARD', KEYS[3]) == 0
    and redis.call('ZCARD', KEYS[7]) == 0 and redis.call('XLEN', KEYS[5]) == 0
    and (ARGV[13] ~= '1' or redis.call('HLEN', prefix .. 'minutes') == 0) then
  redis.call('DEL', KEYS[1], KEYS[2], KEYS[3], KEYS[5], KEYS[6], KEYS[7], KEYS[8], prefix .. 'left', prefix .. 'prequeue',
    prefix .. 'draw', prefix .. 'leftbins', prefix .. 'traces', prefix .. 'entered', prefix .. 'seen', prefix .. 'away',
    prefix .. 'skipped', prefix .. 'texts', prefix .. 'minutes')
  redis.call('DEL', KEYS[4])
  redis.call('HSET', KEYS[4], 'epoch', current)
  redis.call('PEXPIRE', KEYS[4], 3600000)
  return {'GONE'}
end

-- Room left in the outbox: an event can only be written if it fits, so a
-- broker outage fills the stream to its bound and no further.
local room = 1e15
if bound > 0 then
  room = bound - outbox_people(KEYS[5], KEYS[4])
end
local last = tonumber(d[5]) or now
local elapsed = math.max(0, now - last)
-- The batch cap is ceil(rate x span) + 1 where span is the time this tick
-- covers: its elapsed time, at least one tick (a tick never issues more than
-- its share plus one) and at most ten, or a second if that is longer (a
-- leader that was gone longer, a failover, catches up that much, not a
-- burst of everything missed; a slow tick of up to a second makes up all
-- its time at any tick length: queue.CatchUpSpan). The caller supplies
-- grants for the span it measured. The credit is capped at the batch cap
-- too: what a catch-up tick could not admit is not carried into the next
-- second (that was about 15 people too many after every failover).
local span = math.min(math.max(tick_ms, elapsed), math.max(10 * tick_ms, 1000))
local batch_cap = math.ceil(line_rate * span / 1000) + 1
local credit = math.min((tonumber(d[4]) or 0) + line_rate * elapsed / 1000, batch_cap)

-- The measured rate the gateway's ETA uses: an average over about five
-- seconds, weighted by time, of what each tick did. It starts at the
-- configured rate; a tick with people waiting counts what it admitted over
-- its own span, and idle time (nobody waiting) counts as the configured
-- rate, since that is how fast the next person would move.
local function measure(waiting, issued)
  local measured = tonumber(d[6]) or line_rate
  if elapsed > 0 then
    local target = line_rate
    if waiting > 0 then
      target = issued * 1000 / elapsed
    end
    measured = measured + (1 - math.exp(-elapsed / 5000)) * (target - measured)
  end
  return measured
end

-- Held: nobody is admitted and no slot is pruned (that would write an
-- event), for reason; counts waits as busy time unless idle says the wait
-- is not the line's (the draw: a second, once).
local function held(why, idle)
  local waiting = redis.call('ZCARD', KEYS[2])
  local busy = waiting
  if idle then
    busy = 0
  end
  return done({'HELD', 0, 0, waiting, why},
    {'credit', credit, 'lastTickMs', now, 'measuredRate', measure(busy, 0), 'heldReason', why})
end

-- The start came: nobody is admitted until the pre-queue has its places.
if cfg[1] ~= 'CLOSED' then
  local _, drawing = schedule(cfg[6], cfg[11], prefix .. 'draw', prefix .. 'prequeue', KEYS[6], now)
  if drawing == 'DRAWING' then
    return held('DRAW', true)
  end
end

-- Until the relay drains the outbox below its bound.
if room <= 0 then
  return held('OUTBOX_BACKLOG', false)
end

-- 1. Reads. Slots whose expiry passed and their markers; then, if the queue
-- is open, the head of the line and the keys each person's token will use.
local stale = redis.call('ZRANGEBYSCORE', KEYS[3], '-inf', now, 'LIMIT', 0, math.min(1000, room))
local markers = {}
local expiring = 0
for i, user in ipairs(stale) do
  markers[i] = redis.call('GET', status_prefix .. user)
  if marker_state(markers[i]) == 'TOKEN_ISSUED' then
    expiring = expiring + 1
  end
end
local waiting = redis.call('ZCARD', KEYS[2])
-- Presence reads: the quiet (going: {user, seq or nil when not waiting}),
-- the skipped past their grace (abandoning: {user, seq}), or, with the
-- knob back at 0, the away to put back (returning: {user, seq}).
local going, abandoning, returning, gone, forget = {}, {}, {}, {}, false
-- The line's id: its keys' tag without a line tag's salt (tags.go).
local line_id = string.match(prefix, '{([^}~]*)')
if tracked then
  presence_reads(prefix)
end
if presence then
  local quiet = redis.call('ZRANGEBYSCORE', prefix .. 'seen', '-inf', '(' .. (now - away_ms), 'LIMIT', 0, SWEEP)
  if #quiet > 0 then
    local seqs = redis.call('ZMSCORE', KEYS[2], unpack(quiet))
    for i, user in ipairs(quiet) do
      going[i] = {user, seqs[i] and tonumber(seqs[i])}
      gone[user] = true
    end
  end
elseif flagged and not tracked then
  -- The knob went back to 0: the away come back, then the sightings go.
  presence_reads(prefix)
  local back = redis.call('ZRANGE', prefix .. 'away', 0, SWEEP - 1, 'WITHSCORES')
  for i = 1, #back, 2 do
    returning[#returning + 1] = {back[i], tonumber(back[i + 1])}
  end
  forget = #back == 0
end
-- The grace runs out whether or not sightings arrive: those passed over
-- were away while they did.
if tracked and cfg[11] ~= '1' and cfg[1] ~= 'CLOSED' then
  local over = redis.call('ZRANGEBYSCORE', prefix .. 'skipped', '-inf', '(' .. (now - grace_ms), 'LIMIT', 0,
    math.max(0, math.min(SWEEP, room - expiring)))
  if #over > 0 then
    local seqs = redis.call('ZMSCORE', prefix .. 'away', unpack(over))
    for i, user in ipairs(over) do
      redis.call('EXISTS', status_prefix .. user)
      abandoning[i] = {user, tonumber(seqs[i] or '0') or 0}
    end
    redis.call('EXISTS', prefix .. 'entered')
    redis.call('EXISTS', prefix .. 'traces')
  end
end
-- History: the minutes to send, read once a minute (minuteMark), and all
-- of them once the queue is closed (it is deleted once none is left), if
-- the outbox has room for them. What this tick counts comes after.
local minute = minute_of(now)
local sending, figures, mark = {}, {}, false
redis.call('EXISTS', prefix .. 'minutes')
if ARGV[13] == '1' and (cfg[1] == 'CLOSED' or d[14] ~= minute) then
  local all = redis.call('HGETALL', prefix .. 'minutes')
  for i = 1, #all, 2 do
    local m, figure = string.match(all[i], '^(%d+):(.+)$')
    if m and (cfg[1] == 'CLOSED' or m ~= minute) then
      if not figures[m] then
        figures[m] = {}
        sending[#sending + 1] = m
      end
      figures[m][figure] = all[i + 1]
    end
  end
  if #sending > room - expiring - #abandoning then
    sending = {}
  else
    table.sort(sending, function(a, b) return tonumber(a) < tonumber(b) end)
    mark = cfg[1] ~= 'CLOSED'
  end
end
local heads = {}
local tail_reached = false
local traced_enters = 0
local next_times = nil
if cfg[1] == 'OPEN' then
  local grants = math.floor((#ARGV - 15) / 2)
  -- What this tick could admit, however many wait.
  local can = math.min(math.floor(credit), batch_cap, grants, room - expiring - #abandoning - #sending)
  local max_active = tonumber(cfg[3])
  if max_active > 0 then
    -- This line's share of the slots: the lines' shares add up to maxActive.
    max_active = line_share(KEYS[1], max_active)
    can = math.min(can, math.max(0, max_active - (redis.call('ZCARD', KEYS[3]) - #stale)))
  end
  local n = math.min(can, waiting)
  if n > 0 and presence then
    -- The first n present people: past the swept and the quiet. The
    -- sweep took the quiet out already (up to SWEEP a tick), so looking
    -- n + 16 further is plenty; a head of more absentees than that (a
    -- sweep behind) admits fewer this tick and the next sweeps on.
    local scan = redis.call('ZRANGE', KEYS[2], 0, 2 * n + #going + 15, 'WITHSCORES')
    local users = {}
    for i = 1, #scan, 2 do
      users[#users + 1] = scan[i]
    end
    local seen = {}
    if #users > 0 then
      seen = call_list('ZMSCORE', prefix .. 'seen', users)
    end
    for i, user in ipairs(users) do
      if #heads >= 2 * n then
        break
      end
      if not gone[user] then
        if seen[i] and tonumber(seen[i]) < now - away_ms then
          going[#going + 1] = {user, tonumber(scan[2 * i])}
          gone[user] = true
        else
          heads[#heads + 1], heads[#heads + 2] = user, scan[2 * i]
        end
      end
    end
  elseif n > 0 then
    heads = redis.call('ZRANGE', KEYS[2], 0, n - 1, 'WITHSCORES')
  end
  -- The present ran out with room to admit more: the away still ahead of
  -- the frontier have reached their turn (below, they are skipped). That
  -- needs no sightings: the away were taken for away while sightings came,
  -- and once nobody present is left to poll, none may come (the last
  -- pollers admitted in a run of sightings still too young to sweep, after
  -- a failover); their grace, which runs without sightings too, is what
  -- keeps their place for them.
  tail_reached = tracked and #heads < 2 * can
  if #heads > 0 then
    if ARGV[15] == '1' then
      for i = 1, #heads, 2 do
        redis.call('EXISTS', status_prefix .. heads[i])
      end
    end
    -- One key an EXISTS: a two-key EXISTS on keys missing from an
    -- importing slot stalled every tick (TestSlotMigration...).
    redis.call('EXISTS', prefix .. 'left')
    redis.call('EXISTS', prefix .. 'leftbins')
    traced_enters = redis.call('EXISTS', prefix .. 'traces')
  end
  if want > 0 then
    -- The enter times of the people next after this tick's.
    next_times = {}
    if waiting > n then
      local users = redis.call('ZRANGE', KEYS[2], n, n + want - 1)
      for i, at in ipairs(call_list('HMGET', prefix .. 'entered', users)) do
        next_times[i] = tonumber(at) or 0
      end
    end
  end
  if n > 0 then
    -- Read below (the admitted people's waits), then their times go.
    redis.call('EXISTS', prefix .. 'entered')
  end
end

-- 2. Prune. An unused token is a no-show: its marker says EXPIRED and a
-- TokenExpired event goes out. A slot whose order is in flight is freed too
-- (the order-service's reaper settles or restores it, and a restore takes a
-- slot again).
local expired = 0
for i, user in ipairs(stale) do
  redis.call('ZREM', KEYS[3], user)
  if marker_state(markers[i]) == 'TOKEN_ISSUED' then
    local tid = marker_tid(markers[i])
    redis.call('SET', status_prefix .. user, 'EXPIRED:' .. tid, 'KEEPTTL')
    emit(KEYS[5], traced({'type', 'TokenExpired', 'eid', tid .. '.expired', 'q', q, 'user', user,
      'tid', tid, 'reason', 'NO_SHOW', 'at', now}, ARGV[10], ARGV[11]))
    expired = expired + 1
  end
end

-- Presence writes: the quiet go away (those no longer waiting just stop
-- being tracked), the skipped past their grace are removed, and with the
-- knob at 0 the away come back.
for _, g in ipairs(going) do
  if g[2] then
    mark_away(prefix, KEYS[2], KEYS[4], g[1], g[2], frontier, now)
  else
    redis.call('ZREM', prefix .. 'seen', g[1])
  end
end
for _, a in ipairs(abandoning) do
  local user, seq = a[1], string.format('%d', a[2])
  redis.call('ZREM', prefix .. 'skipped', user)
  redis.call('ZREM', prefix .. 'away', user)
  redis.call('SET', status_prefix .. user, 'ABANDONED:' .. seq, 'PX', 3600000)
  redis.call('HDEL', prefix .. 'entered', user)
  redis.call('HDEL', prefix .. 'traces', user)
  emit(KEYS[5], traced({'type', 'UserAbandoned', 'eid', line_id .. ':' .. seq .. '.abandoned', 'q', q, 'user', user,
    'seq', seq, 'reason', 'AWAY', 'at', now}, ARGV[10], ARGV[11]))
end
if #abandoning > 0 then
  redis.call('HINCRBY', KEYS[4], 'abandonedTotal', #abandoning)
end
for _, r in ipairs(returning) do
  come_back(prefix, KEYS[2], KEYS[4], r[1], r[2], now)
end
if forget then
  redis.call('DEL', prefix .. 'seen', prefix .. 'skipped')
  redis.call('HDEL', KEYS[4], 'presenceKeys')
end
if #going + #returning > 0 then
  waiting = redis.call('ZCARD', KEYS[2])
end

-- History: the finished minutes go out, one QueueMinute each (its id
-- numbered by the line's sends, so a minute sent twice, a closed queue's
-- last one, is two parts of it); then this tick's own figures.
if #sending > 0 then
  local sends = redis.call('HINCRBY', KEYS[4], 'minuteSends', 1)
  for _, m in ipairs(sending) do
    local f = figures[m]
    local buckets, names = {}, {}
    for figure, n in pairs(f) do
      names[#names + 1] = m .. ':' .. figure
      local b = string.match(figure, '^w(%d+)$')
      if b then
        buckets[#buckets + 1] = b .. ':' .. n
      end
    end
    table.sort(buckets)
    emit(KEYS[5], {'type', 'QueueMinute', 'eid', 'minute.' .. line_id .. '.' .. m .. '.' .. sends, 'q', q,
      'line', line_id, 'min', string.format('%d', tonumber(m) * 60000), 'arr', f.arr or 0, 'adm', f.adm or 0,
      'exp', f.exp or 0, 'left', f.left or 0, 'aband', f.aband or 0, 'wmax', f.wmax or 0,
      'wb', table.concat(buckets, ','), 'at', now})
    redis.call('HDEL', prefix .. 'minutes', unpack(names))
  end
end
if mark then
  redis.call('HSET', KEYS[4], 'minuteMark', minute)
end
minute_add(prefix, 'exp', expired, now)
minute_add(prefix, 'aband', #abandoning, now)

if cfg[1] ~= 'OPEN' then
  -- Nothing accrues while not OPEN: a queue that reopens resumes at its
  -- rate, and its measured rate starts again from the configured one.
  redis.call('HDEL', KEYS[4], 'measuredRate')
  return done({'PAUSED', 0, expired, waiting}, {'credit', 0, 'lastTickMs', now, 'heldReason', '', 'punctualMs', now})
end

-- 3. Admit the head of the line, in the order people came.
local ttl_ms = tonumber(cfg[4]) * 1000
local spread = tonumber(cfg[5])
local issued = #heads / 2
if issued > 0 then
  -- The swept are out of the line already: the present heads are its first.
  redis.call('ZREMRANGEBYRANK', KEYS[2], 0, issued - 1)
  if tracked then
    local users = {}
    for i = 1, issued do
      users[i] = heads[2 * i - 1]
    end
    call_list('ZREM', prefix .. 'seen', users)
    -- The away people whose places this admission passes are skipped: their
    -- grace starts now.
    local last = tonumber(heads[2 * issued])
    if last > frontier then
      for _, user in ipairs(redis.call('ZRANGEBYSCORE', prefix .. 'away', '(' .. string.format('%d', frontier),
          string.format('%d', last))) do
        redis.call('ZADD', prefix .. 'skipped', 'NX', now, user)
      end
    end
  end
  -- Everyone who entered before the last person admitted now is resolved:
  -- admitted, or in left. Those leavers join leftResolved.
  -- They leave the leaver bins too.
  local before = '(' .. heads[2 * issued]
  -- A draw's unused number ("<seq>:", nobody's place) is no leaver of the
  -- leave share: its pre-queued person never had a place.
  local passed = redis.call('ZRANGEBYSCORE', prefix .. 'left', '-inf', before, 'WITHSCORES')
  if #passed > 0 then
    local seqs, leavers = {}, 0
    for i = 1, #passed, 2 do
      seqs[#seqs + 1] = tonumber(passed[i + 1])
      -- An away person's place ("<seq>:!<user>", mark_away) is one.
      if string.sub(passed[i], -1) ~= ':' then
        leavers = leavers + 1
      end
    end
    bins_add(prefix .. 'leftbins', seqs, -1)
    redis.call('ZREMRANGEBYSCORE', prefix .. 'left', '-inf', before)
    if leavers > 0 then
      redis.call('HINCRBY', KEYS[4], 'leftResolved', leavers)
    end
  end
end
-- The admitted go to the outbox as one entry, TokensIssued (the store
-- reads it back as a TokenIssued each): an entry a person was an XADD, a
-- read, an acknowledgement and a delete each, the most of a tick's cost
-- at tens of thousands a second. Its eid is its last token's, so the last
-- event a relay read names the entry (touch.lua). outboxExtra in the
-- dispatch hash counts the people the stream holds beyond its entries (a
-- batch of n adds n - 1; outbox_ack.lua takes it back), so the bound
-- above counts people.
local slots, users, tids, seqs, acts = {}, {}, {}, {}, {}
for i = 1, issued do
  local user, seq = heads[2 * i - 1], heads[2 * i]
  local secret, tid = ARGV[14 + 2 * i], ARGV[15 + 2 * i]
  -- Activation times spread evenly over the window, so one batch does not
  -- reach the order path in the same millisecond.
  local activate = now + math.floor(spread * (i - 1) / issued)
  local act, exp = string.format('%d', activate), string.format('%d', activate + ttl_ms)
  -- The token is its holder's marker (token_marker): one key, one SET. A
  -- token the person may still hold, theirs from an earlier admission, is
  -- replaced whole.
  redis.call('SET', status_prefix .. user, token_marker(tid, secret, act, exp, seq), 'PXAT',
    string.format('%d', activate + ttl_ms + 120000))
  slots[#slots + 1], slots[#slots + 2] = exp, user
  users[i], tids[i], seqs[i], acts[i] = user, tid, seq, act
  if #slots >= 2 * UNPACK_MAX or i == issued then
    redis.call('ZADD', KEYS[3], unpack(slots))
    slots = {}
  end
end
if issued > 0 then
  emit(KEYS[5], traced({'type', 'TokensIssued', 'eid', tids[issued] .. '.issued', 'q', q, 'at', now, 'ttl', ttl_ms,
    'users', table.concat(users, ' '), 'tids', table.concat(tids, ' '), 'seqs', table.concat(seqs, ' '),
    'acts', table.concat(acts, ' ')}, ARGV[10], ARGV[11]))
  if issued > 1 then
    redis.call('HINCRBY', KEYS[4], 'outboxExtra', issued - 1)
  end
end
-- The line ran out of present people with room left: every away person
-- still ahead of the frontier has reached their turn, and is skipped now
-- (else one at the tail, with nobody behind, would never be passed, nor
-- removed).
if tail_reached then
  local from = math.max(frontier, issued > 0 and tonumber(heads[2 * issued]) or 0)
  for _, user in ipairs(redis.call('ZRANGEBYSCORE', prefix .. 'away', '(' .. string.format('%d', from), '+inf', 'LIMIT', 0, SWEEP)) do
    redis.call('ZADD', prefix .. 'skipped', 'NX', now, user)
  end
end
-- The traces of the admitted people's enters, kept only for sampled
-- enters: handed to the tick span as links, then dropped.
local links = {}
if issued > 0 and traced_enters == 1 then
  local users = {}
  for i = 1, issued do
    users[i] = heads[2 * i - 1]
  end
  for _, tp in ipairs(call_list('HMGET', prefix .. 'traces', users)) do
    if tp then
      links[#links + 1] = tp
    end
  end
  call_list('HDEL', prefix .. 'traces', users)
end
if issued > 0 then
  -- History: the admitted and their waits, from their enter times (a
  -- person placed by the draw, who has none, waited from the start), which
  -- go with them.
  local users = {}
  for i = 1, issued do
    users[i] = heads[2 * i - 1]
  end
  local buckets, longest = {}, nil
  local starts = tonumber(cfg[6] or '0') or 0
  for _, at in ipairs(call_list('HMGET', prefix .. 'entered', users)) do
    local from = at and math.floor(tonumber(at) / 1000) or (starts > 0 and starts) or nil
    if from then
      local wait = math.max(0, now - from)
      local b = wait_bucket(wait)
      buckets[b] = (buckets[b] or 0) + 1
      longest = math.max(longest or 0, wait)
    end
  end
  call_list('HDEL', prefix .. 'entered', users)
  minute_add(prefix, 'adm', issued, now)
  for b, n in pairs(buckets) do
    minute_add(prefix, 'w' .. b, n, now)
  end
  if longest then
    local field = minute .. ':wmax'
    if longest > (tonumber(redis.call('HGET', prefix .. 'minutes', field) or '0') or 0) then
      redis.call('HSET', prefix .. 'minutes', field, string.format('%d', longest))
    end
  end
end

redis.call('HINCRBY', KEYS[4], 'issuedTotal', issued)
local fields = {'credit', credit - issued, 'lastTickMs', now, 'measuredRate', measure(waiting, issued), 'heldReason', '',
  'punctualMs', now}
-- The admission frontier moved: recorded, and told to the replicas'
-- frontier caches ("<queue> <last seq> <leavers above it in its fine bin>
-- <waiting>"), so a ticket's place is right within a millisecond of the
-- tick rather than at their next read. A tick that admitted only people
-- who came back to places already passed leaves it where it is.
local moved = issued > 0 and tonumber(heads[2 * issued]) or 0
if moved > frontier then
  local bin_end = (math.floor((moved + 1) / FINE_BIN) + 1) * FINE_BIN - 1
  local first_left = redis.call('ZCOUNT', prefix .. 'left', '(' .. string.format('%d', moved), bin_end)
  fields[#fields + 1], fields[#fields + 2] = 'frontier', string.format('%d', moved)
  redis.call('PUBLISH', FRONTIER_CHANNEL, line_id .. ' ' .. string.format('%d', moved) .. ' ' .. first_left .. ' ' .. (waiting - issued))
end
local r = done({'OK', issued, expired, waiting - issued, '', 0, 0, 0, 0, 0, 0, 0, links}, fields)
r[14] = next_times
return r
