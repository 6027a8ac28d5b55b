-- touch: a write that changes nothing, for a caller about to wait for the
-- replicas (WAIT) on a connection that may have changed nothing itself: the
-- relay, before it publishes events it read (a re-read of pending events
-- changes nothing on the primary). WAIT waits for what its connection
-- wrote; this rewrite reaches the replicas after the events did, so the
-- WAIT covers them. The queue's dispatch hash is rewritten with its own
-- epoch (acked in the prelude), only if it exists: a touch never creates a
-- key.
--
-- It first checks that this node holds the events the relay read. The
-- relay may have read them from a primary that a failover replaced since
-- (its client follows the new one between the read and this call), and
-- there a WAIT would confirm events the new primary never had: an
-- admission published for nobody the new primary knows, who would be
-- admitted again. The last event read is enough: a promoted replica holds
-- a prefix of the old primary's stream (then entries of its own), so if
-- it holds the last one read, with that event id, it holds every one
-- before it; an entry of its own under the same entry id has another
-- event id.
--
-- Called by: Store.OutboxReplicated (replicas.go), for the admission-dispatcher's dispatch.OutboxStore (relay.round, while replicas are required)
-- KEYS: 1 dispatch, 2 outbox
-- ARGV: 1 the highest entry id read (none: no check), 2 its event id
-- Returns 1 when written, 0 when there was no dispatch hash, -1 when the
-- event is not here (nothing written).
if ARGV[1] then
  local e = redis.call('XRANGE', KEYS[2], ARGV[1], ARGV[1])
  local eid = nil
  if e[1] then
    local f = e[1][2]
    for j = 1, #f, 2 do
      if f[j] == 'eid' then
        eid = f[j + 1]
      end
    end
  end
  if eid ~= ARGV[2] then
    return -1
  end
end
if redis.call('EXISTS', KEYS[1]) == 1 then
  acked('1', KEYS[1], 'epoch')
  return 1
end
return 0
