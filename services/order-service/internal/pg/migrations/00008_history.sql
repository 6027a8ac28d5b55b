-- +goose NO TRANSACTION
-- The history the sale report is made of (docs/DESIGN.md, "History").
-- queue_minutes: one row per QueueMinute event (a part of one line's
-- minute: arrivals, admissions, expired tokens, leaves, the abandoned and
-- the admitted people's waits as a histogram), keyed by the event id, so a
-- redelivered event is stored once; a minute is the sum of its rows.
-- order_minutes: the orders created and failed per queue and minute,
-- counted from the outbox by the order-service's roll-up (recomputed for
-- the last minutes on every pass, so it is the same whichever replica runs
-- it and however often). The outbox gains the queue of each order event
-- (added with a constant default: no table rewrite) and an index on the
-- time of those events, built CONCURRENTLY, so orders never wait for it.

-- +goose Up
ALTER TABLE outbox ADD COLUMN IF NOT EXISTS queue_id text NOT NULL DEFAULT '';
CREATE INDEX CONCURRENTLY IF NOT EXISTS outbox_queue_occurred_idx ON outbox (occurred_at) WHERE queue_id <> '';
CREATE TABLE IF NOT EXISTS queue_minutes (
    event_id       text PRIMARY KEY,
    queue_id       text NOT NULL,
    line_id        text NOT NULL,
    minute         timestamptz NOT NULL,
    arrivals       bigint NOT NULL DEFAULT 0,
    admitted       bigint NOT NULL DEFAULT 0,
    expired_unused bigint NOT NULL DEFAULT 0,
    left_line      bigint NOT NULL DEFAULT 0,
    abandoned      bigint NOT NULL DEFAULT 0,
    wait_histogram bigint[] NOT NULL DEFAULT '{}',
    wait_max_ms    bigint NOT NULL DEFAULT 0,
    received_at    timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX IF NOT EXISTS queue_minutes_queue_minute ON queue_minutes (queue_id, minute);
CREATE INDEX IF NOT EXISTS queue_minutes_minute ON queue_minutes (minute);
CREATE TABLE IF NOT EXISTS order_minutes (
    queue_id  text NOT NULL,
    minute    timestamptz NOT NULL,
    created   bigint NOT NULL DEFAULT 0,
    failed    bigint NOT NULL DEFAULT 0,
    rolled_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (queue_id, minute)
);
CREATE INDEX IF NOT EXISTS order_minutes_minute ON order_minutes (minute);

-- +goose Down
DROP TABLE IF EXISTS order_minutes;
DROP TABLE IF EXISTS queue_minutes;
DROP INDEX CONCURRENTLY IF EXISTS outbox_queue_occurred_idx;
ALTER TABLE outbox DROP COLUMN IF EXISTS queue_id;
