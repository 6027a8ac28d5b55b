-- +goose NO TRANSACTION
-- One resolution per order attempt. Each OrderCreated and OrderFailed row
-- names the attempt it resolves (the order id consume took the token
-- with), and the attempt is unique: an OrderFailed for an attempt whose
-- order committed (its COMMIT answered late, after the order-service had
-- given up on it) is refused, and so is an order whose attempt was
-- recorded failed first (its statements reached the database late). Two
-- writers of the same attempt meet on the index: the second waits for the
-- first's transaction and then fails. Without it a late commit and the
-- failure path both happen, and the token comes back for an order that
-- exists. Rows written before this migration have no attempt. A nullable
-- column without default is added without rewriting the table; the index
-- is built CONCURRENTLY, so orders never wait for it.

-- +goose Up
ALTER TABLE outbox ADD COLUMN IF NOT EXISTS attempt text NULL;
CREATE UNIQUE INDEX CONCURRENTLY IF NOT EXISTS outbox_attempt_key ON outbox (attempt) WHERE attempt IS NOT NULL;

-- +goose Down
DROP INDEX CONCURRENTLY IF EXISTS outbox_attempt_key;
ALTER TABLE outbox DROP COLUMN IF EXISTS attempt;
