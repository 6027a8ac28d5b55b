-- lease: acquire, renew or release the dispatcher lease of one queue.
-- The lock value is "<owner>:<epoch>". Acquiring bumps the queue's epoch, the
-- fencing token every issue call must present: a paused ex-leader holding an
-- old epoch can never issue again.
-- KEYS: 1 lock, 2 dispatch
-- ARGV: 1 op (acquire | renew | release), 2 owner, 3 lease ms, 4 epoch (renew, release)
local op, owner = ARGV[1], ARGV[2]
if op == 'acquire' then
  if redis.call('EXISTS', KEYS[1]) == 1 then
    return 0
  end
  local epoch = redis.call('HINCRBY', KEYS[2], 'epoch', 1)
  redis.call('SET', KEYS[1], owner .. ':' .. epoch, 'PX', ARGV[3])
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
