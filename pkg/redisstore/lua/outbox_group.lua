-- outbox_group: create the relay group of a queue's outbox (and the stream)
-- if the queue exists. A relay of a queue that was just deleted must not
-- bring its outbox back as a key nobody will ever remove.
-- Called by: Store.EnsureOutboxGroup (outbox.go), for the admission-dispatcher's dispatch.OutboxStore (relay.round)
-- KEYS: 1 config, 2 outbox
-- ARGV: 1 group
if redis.call('EXISTS', KEYS[1]) == 0 then
  return 0
end
local r = redis.pcall('XGROUP', 'CREATE', KEYS[2], ARGV[1], '0', 'MKSTREAM')
if type(r) == 'table' and r.err and not string.find(r.err, 'BUSYGROUP', 1, true) then
  return redis.error_reply(r.err)
end
return 1
