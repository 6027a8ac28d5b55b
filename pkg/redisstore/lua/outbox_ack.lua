-- outbox_ack: acknowledge published events of one outbox and delete them,
-- together, so an entry is never left in the stream but out of the pending
-- list. One script a stream: the relay acknowledges many queues' (and
-- lines') outboxes in one pipelined round, and a MULTI over several hash
-- slots is refused on a cluster (CROSSSLOT) even when one node serves them.
-- Called by: Store.AckOutboxes (outbox.go), for the admission-dispatcher's dispatch.OutboxStore (relay.round)
-- KEYS: 1 outbox
-- ARGV: 1 group, 2.. stream ids
local ids = {}
for i = 2, #ARGV do
  ids[#ids + 1] = ARGV[i]
end
redis.call('XACK', KEYS[1], ARGV[1], unpack(ids))
return redis.call('XDEL', KEYS[1], unpack(ids))
