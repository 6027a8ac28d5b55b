-- +goose NO TRANSACTION
-- Indexes for the retention job: sent outbox rows and idempotency keys are
-- deleted once older than their retention. Built CONCURRENTLY (outside a
-- transaction), so adding them to a live database never blocks orders.

-- +goose Up
CREATE INDEX CONCURRENTLY IF NOT EXISTS outbox_sent_at_idx ON outbox (sent_at) WHERE sent_at IS NOT NULL;
CREATE INDEX CONCURRENTLY IF NOT EXISTS idempotency_created_at_idx ON idempotency (created_at);

-- +goose Down
DROP INDEX CONCURRENTLY IF EXISTS idempotency_created_at_idx;
DROP INDEX CONCURRENTLY IF EXISTS outbox_sent_at_idx;
