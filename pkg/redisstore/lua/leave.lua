-- leave: take a user out of the line.
-- KEYS: 1 config, 2 waiting
-- ARGV: 1 user id
if redis.call('EXISTS', KEYS[1]) == 0 then
  return -1
end
return redis.call('ZREM', KEYS[2], ARGV[1])
