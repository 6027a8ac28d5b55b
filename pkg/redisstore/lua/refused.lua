-- refused: record in a queue's outbox that an operator's change of it was
-- refused (a QueueChanged of outcome REFUSED), only while the queue exists:
-- a refused create of a queue that never existed leaves no key behind.
-- Called by: Store.RefuseChange (config.go), for the queue-gateway's
-- app.Service (ConfigureIf, RefusedChange)
-- KEYS: 1 config, 2 outbox
-- ARGV: the outbox entry's fields and values, in pairs
-- Returns 1 when recorded, 0 when the queue does not exist.
if redis.call('EXISTS', KEYS[1]) == 0 then
  return 0
end
emit(KEYS[2], ARGV)
return 1
