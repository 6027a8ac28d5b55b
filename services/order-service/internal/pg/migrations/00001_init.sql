-- +goose Up

-- Every order updates its product row, so leave room on each page for the
-- new row version: updates stay HOT (no index touched) on the hot row.
CREATE TABLE products (
    id          text PRIMARY KEY,
    queue_id    text NOT NULL,
    name        text NOT NULL,
    stock       integer NOT NULL CHECK (stock >= 0),
    price_cents bigint NOT NULL CHECK (price_cents >= 0),
    updated_at  timestamptz NOT NULL DEFAULT now()
) WITH (fillfactor = 70);

CREATE INDEX products_queue_id_idx ON products (queue_id);

CREATE TABLE orders (
    id              text PRIMARY KEY,
    user_id         text NOT NULL,
    queue_id        text NOT NULL,
    product_id      text NOT NULL REFERENCES products (id),
    quantity        integer NOT NULL CHECK (quantity > 0),
    entry_token_id  text NOT NULL,
    idempotency_key text NULL,
    status          text NOT NULL,
    created_at      timestamptz NOT NULL DEFAULT now(),
    -- One order per entry token, whatever the application does.
    CONSTRAINT orders_entry_token_id_key UNIQUE (entry_token_id)
);

CREATE UNIQUE INDEX orders_user_idempotency_key_key
    ON orders (user_id, idempotency_key) WHERE idempotency_key IS NOT NULL;

CREATE TABLE outbox (
    id          bigserial PRIMARY KEY,
    event_id    text NOT NULL,
    routing_key text NOT NULL,
    type        text NOT NULL,
    payload     bytea NOT NULL,
    occurred_at timestamptz NOT NULL,
    created_at  timestamptz NOT NULL DEFAULT now(),
    sent_at     timestamptz NULL,
    CONSTRAINT outbox_event_id_key UNIQUE (event_id)
);

-- The relay only ever reads unsent rows, oldest first; sent ones pile up
-- outside this index.
CREATE INDEX outbox_unsent_idx ON outbox (id) WHERE sent_at IS NULL;

CREATE TABLE idempotency (
    user_id    text NOT NULL,
    key        text NOT NULL,
    status     integer NULL, -- NULL while the first request runs
    body       bytea NULL,
    created_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (user_id, key)
);

-- +goose Down
DROP TABLE idempotency;
DROP TABLE outbox;
DROP TABLE orders;
DROP TABLE products;
