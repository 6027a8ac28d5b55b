-- texts: set or remove a queue's own wording of the waiting page in one
-- language, only while the queue exists.
-- On an operator's behalf (ARGV 3 on) it writes their QueueChanged (action
-- WORDED: the language's wording before and after) to the outbox with the
-- change.
-- Called by: Store.PutTexts, Store.DeleteTexts (texts.go), for the
-- queue-gateway's admin API (PUT/DELETE /admin/v1/queues/{q}/texts/{lang})
-- KEYS: 1 config, 2 texts, 3 outbox
-- ARGV: 1 language, 2 the messages (a JSON object), or '' to remove them;
--       3 the operator's subject ('' for none), 4 their address, 5 the
--       queue id
-- Returns -1 when the queue does not exist; else 1 when the language had
-- a wording before, 0 when not.
if redis.call('EXISTS', KEYS[1]) == 0 then
  return -1
end
local old = redis.call('HGET', KEYS[2], ARGV[1])
if ARGV[2] == '' then
  redis.call('HDEL', KEYS[2], ARGV[1])
else
  redis.call('HSET', KEYS[2], ARGV[1], ARGV[2])
end
-- A removal of a wording the queue did not have changed nothing: no event.
if ARGV[3] and ARGV[3] ~= '' and (ARGV[2] ~= '' or old) then
  local function wording(msgs)
    if not msgs or msgs == '' then
      msgs = 'null'
    end
    return '{"lang":' .. cjson.encode(ARGV[1]) .. ',"texts":' .. msgs .. '}'
  end
  local now = now_ms()
  local version = redis.call('HINCRBY', KEYS[1], 'textsVersion', 1)
  local born = redis.call('HGET', KEYS[1], 'createdAtMs') or '0'
  emit(KEYS[3], {'type', 'QueueChanged', 'eid', ARGV[5] .. ':' .. born .. ':t' .. version .. '.worded', 'q', ARGV[5],
    'at', now, 'actor', ARGV[3], 'addr', ARGV[4], 'worded', '1', 'outcome', 'APPLIED',
    'before', wording(old), 'after', wording(ARGV[2])})
end
if old then
  return 1
end
return 0
