-- outbox_ack: acknowledge published events of one outbox and delete them,
-- together, so an entry is never left in the stream but out of the pending
-- list. One script a stream: the relay acknowledges many queues' (and
-- lines') outboxes in one pipelined round, and a MULTI over several hash
-- slots is refused on a cluster (CROSSSLOT) even when one node serves them.
--
-- A TokensIssued entry of n people took outboxExtra of the dispatch hash
-- up by n - 1 (issue.lua): deleting it takes it back down, only when this
-- call deleted it, so an acknowledgement sent twice (a reply lost, the
-- relay retrying) counts once.
-- Called by: Store.AckOutboxes (outbox.go), for the admission-dispatcher's dispatch.OutboxStore (relay.round)
-- KEYS: 1 outbox, 2 dispatch
-- ARGV: 1 group, 2 k, then k pairs (stream id of a TokensIssued entry,
--       its people - 1), then the other stream ids
local k = tonumber(ARGV[2])
local ids = {}
for i = 3, #ARGV do
  if i > 2 + 2 * k or (i - 3) % 2 == 0 then
    ids[#ids + 1] = ARGV[i]
  end
end
redis.call('XACK', KEYS[1], ARGV[1], unpack(ids))
local deleted, extra = 0, 0
for j = 1, k do
  local id, n = ARGV[1 + 2 * j], tonumber(ARGV[2 + 2 * j])
  if redis.call('XDEL', KEYS[1], id) == 1 then
    deleted = deleted + 1
    extra = extra + n
  end
end
if #ids > k then
  deleted = deleted + redis.call('XDEL', KEYS[1], unpack(ids, k + 1))
end
if extra > 0 and redis.call('EXISTS', KEYS[2]) == 1 then
  redis.call('HINCRBY', KEYS[2], 'outboxExtra', -extra)
end
return deleted
