-- touch: a write that changes nothing, for a caller about to wait for the
-- replicas (WAIT) on a connection that may have changed nothing itself: the
-- relay, before it publishes events it read (a re-read of pending events
-- changes nothing on the primary). WAIT waits for what its connection
-- wrote; this rewrite reaches the replicas after the events did, so the
-- WAIT covers them. The queue's dispatch hash is rewritten with its own
-- epoch (acked in the prelude), only if it exists: a touch never creates a
-- key.
--
-- KEYS: 1 dispatch
-- Returns 1 when written, 0 when there was no dispatch hash.
if redis.call('EXISTS', KEYS[1]) == 1 then
  acked('1', KEYS[1], 'epoch')
  return 1
end
return 0
