-- The audit trail of the queues' configuration: one row per QueueChanged
-- event (an operator's change through the gateway's admin API, applied or
-- refused), written by the order-service's consumer of queue.changed. The
-- event id is the key, so a redelivered event is stored once. A refused
-- change's after_knobs is the change asked for (NULL when the request was
-- not JSON).

-- +goose Up
CREATE TABLE IF NOT EXISTS queue_changes (
    event_id       text PRIMARY KEY,
    queue_id       text NOT NULL,
    actor          text NOT NULL,
    client_address text NOT NULL DEFAULT '',
    action         text NOT NULL,
    before_knobs   jsonb NULL,
    after_knobs    jsonb NULL,
    etag           text NOT NULL DEFAULT '',
    outcome        text NOT NULL DEFAULT 'APPLIED',
    refusal        text NOT NULL DEFAULT '',
    occurred_at    timestamptz NOT NULL,
    received_at    timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX IF NOT EXISTS queue_changes_queue_time ON queue_changes (queue_id, occurred_at DESC, event_id DESC);
CREATE INDEX IF NOT EXISTS queue_changes_time ON queue_changes (occurred_at DESC, event_id DESC);

-- +goose Down
DROP TABLE IF EXISTS queue_changes;
