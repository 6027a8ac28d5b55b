-- leave: take a user out of the line. A person who was waiting is counted
-- in leftTotal, which the wait estimates discount the people ahead by.
-- KEYS: 1 config, 2 waiting, 3 dispatch
-- ARGV: 1 user id
if redis.call('EXISTS', KEYS[1]) == 0 then
  return -1
end
local removed = redis.call('ZREM', KEYS[2], ARGV[1])
if removed == 1 then
  redis.call('HINCRBY', KEYS[3], 'leftTotal', 1)
end
return removed
