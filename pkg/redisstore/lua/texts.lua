-- texts: set or remove a queue's own wording of the waiting page in one
-- language, only while the queue exists.
-- Called by: Store.PutTexts, Store.DeleteTexts (texts.go), for the
-- queue-gateway's admin API (PUT/DELETE /admin/v1/queues/{q}/texts/{lang})
-- KEYS: 1 config, 2 texts
-- ARGV: 1 language, 2 the messages (a JSON object), or '' to remove them
-- Returns -1 when the queue does not exist; else 1 when the language had
-- a wording before, 0 when not.
if redis.call('EXISTS', KEYS[1]) == 0 then
  return -1
end
local had = redis.call('HEXISTS', KEYS[2], ARGV[1])
if ARGV[2] == '' then
  redis.call('HDEL', KEYS[2], ARGV[1])
else
  redis.call('HSET', KEYS[2], ARGV[1], ARGV[2])
end
return had
