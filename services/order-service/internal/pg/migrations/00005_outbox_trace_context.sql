-- The W3C trace context each outbox event was written in (the request that
-- placed or failed the order), so that the relay's publish, however late,
-- continues that trace. Empty for events written untraced. Constant
-- defaults: no table rewrite (PostgreSQL 11+).

-- +goose Up
ALTER TABLE outbox ADD COLUMN traceparent text NOT NULL DEFAULT '';
ALTER TABLE outbox ADD COLUMN tracestate text NOT NULL DEFAULT '';

-- +goose Down
ALTER TABLE outbox DROP COLUMN tracestate;
ALTER TABLE outbox DROP COLUMN traceparent;
