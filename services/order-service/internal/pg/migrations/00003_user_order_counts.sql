-- Orders per person per queue, what a queue's maxOrdersPerUser is checked
-- against: the order transaction adds one to the person's row under its row
-- lock, so concurrent orders of one person cannot both pass the limit, and a
-- rolled-back order takes its count back with it. Every order counts, limit
-- or not, so a limit set in the middle of a sale counts the orders before it.
-- Backfilled from the orders already placed.

-- +goose Up
CREATE TABLE user_order_counts (
    queue_id text    NOT NULL,
    user_id  text    NOT NULL,
    orders   integer NOT NULL CHECK (orders > 0),
    PRIMARY KEY (queue_id, user_id)
);
INSERT INTO user_order_counts (queue_id, user_id, orders)
SELECT queue_id, user_id, count(*) FROM orders GROUP BY queue_id, user_id;

-- +goose Down
DROP TABLE user_order_counts;
