-- Orders taken without an entry token while Redis was unreachable, on a
-- queue that fails OPEN, are marked: their entry_token_id is a synthetic
-- "bypass-" + id, no token was consumed. A constant default adds the column
-- without rewriting the table (PostgreSQL 11+).

-- +goose Up
ALTER TABLE orders ADD COLUMN bypassed boolean NOT NULL DEFAULT false;

-- +goose Down
ALTER TABLE orders DROP COLUMN bypassed;
