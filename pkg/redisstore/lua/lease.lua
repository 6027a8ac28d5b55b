-- lease: acquire, renew or release the dispatcher lease of one queue.
-- The lock value is "<owner>:<epoch>". Acquiring bumps the queue's epoch, the
-- fencing token every issue call must present: a paused ex-leader holding an
-- old epoch can never issue again.
--
-- Safe to run twice. An acquire carries an attempt id, kept in the dispatch
-- hash: a repeat of the attempt that took the lease answers its epoch
-- instead of "held by someone" (which would leave the queue leaderless until
-- the lease ran out). Renew and release are idempotent as they are.
--
-- A queue split into lines is led by the holder of line 0's lease (the
-- queue's own). Before its first tick the leader runs 'follow' on every
-- other line: the line's epoch is raised to the leader's, so an ex-leader's
-- tick on that line is refused from then on, as on line 0. A lower epoch
-- than the line's gets 0 (a newer leader followed already); a line without
-- its config copy -1.
--
-- Never late: acquire and renew carry a deadline (ARGV 5, Redis TIME ms; 0
-- or absent: none), when their caller gives up on them. Past it they are
-- refused with -2 and change nothing: a late acquire would take a lease its
-- owner no longer waits for (a later attempt of the same owner is a new
-- attempt id, so the queue would stay leaderless until the lease ran out),
-- and a late renew would stretch a lease its owner has already given up.
--
-- The epoch never goes backwards, even when a failover promoted a replica
-- that missed the last grant: a new epoch is the larger of the last one
-- plus one and the Redis TIME in ms. The grant is also acknowledged only
-- once the replicas hold it (Store.RequireReplicas); the clock covers what
-- WAIT cannot promise (a replica that confirmed it and was not the one
-- promoted), as long as the new primary's clock is not behind the old one's
-- by more than the failover took.
--
-- Called by: Store.AcquireLeases, Store.RenewLeases, Store.FollowLeases (batch.go) and Store.ReleaseLease (admission.go), for the admission-dispatcher's dispatch.LeaseStore (leases.acquire, leases.run, leases.follow, leases.release)
-- KEYS: 1 lock, 2 dispatch, 3 config
-- ARGV: 1 op (acquire | renew | release | follow), 2 owner, 3 lease ms,
--       4 epoch (renew, release, follow) or attempt id (acquire),
--       5 deadline ms (acquire, renew), 6 '1' when the caller waits for
--       replicas: an acquire's repeat and a follow that changes nothing
--       write acked's no-op (the epoch + 0)
local op, owner = ARGV[1], ARGV[2]
local late = tonumber(ARGV[5] or '0') or 0
if late > 0 and (op == 'acquire' or op == 'renew') and now_ms() > late then
  return -2
end
if op == 'acquire' then
  local held = redis.call('GET', KEYS[1])
  if held then
    local d = redis.call('HMGET', KEYS[2], 'epoch', 'leaseAttempt')
    if d[2] == ARGV[4] and held == owner .. ':' .. d[1] then
      acked(ARGV[6], KEYS[2], 'epoch')
      return tonumber(d[1])
    end
    return 0
  end
  -- A queue without configuration (deleted, or never created) has nothing
  -- to lead; leading it would only recreate its dispatch state.
  if redis.call('EXISTS', KEYS[3]) == 0 then
    return -1
  end
  local last = tonumber(redis.call('HGET', KEYS[2], 'epoch') or '0')
  local epoch = math.max(last + 1, now_ms())
  local e = string.format('%.0f', epoch)
  redis.call('HSET', KEYS[2], 'epoch', e, 'leaseAttempt', ARGV[4])
  redis.call('PERSIST', KEYS[2])
  redis.call('SET', KEYS[1], owner .. ':' .. e, 'PX', ARGV[3])
  return epoch
end
if op == 'follow' then
  if redis.call('EXISTS', KEYS[3]) == 0 then
    return -1
  end
  local epoch = tonumber(ARGV[4])
  local current = tonumber(redis.call('HGET', KEYS[2], 'epoch') or '0')
  if epoch < current then
    return 0
  end
  if epoch > current then
    redis.call('HSET', KEYS[2], 'epoch', string.format('%.0f', epoch))
    redis.call('PERSIST', KEYS[2])
  else
    acked(ARGV[6], KEYS[2], 'epoch')
  end
  return epoch
end
local mine = redis.call('GET', KEYS[1]) == owner .. ':' .. ARGV[4]
if op == 'renew' then
  if not mine then
    return 0
  end
  redis.call('PEXPIRE', KEYS[1], ARGV[3])
  return 1
elseif op == 'release' then
  if not mine then
    return 0
  end
  redis.call('DEL', KEYS[1])
  return 1
end
return redis.error_reply('lease: unknown op ' .. tostring(op))
