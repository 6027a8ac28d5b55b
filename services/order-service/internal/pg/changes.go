package pg

import (
	"context"
	"encoding/json"
	"strings"

	"github.com/waitingroom/waitingroom/services/order-service/internal/audit"
)

// SaveChange stores one operator's change of a queue once, by its event
// id: a redelivered QueueChanged is a no-op.
func (d *DB) SaveChange(ctx context.Context, c audit.Change) (bool, error) {
	tctx, cancel := d.timeout(ctx)
	defer cancel()
	res := d.conn(tctx).Exec(`
		INSERT INTO queue_changes (event_id, queue_id, actor, client_address, action, before_knobs, after_knobs, etag, outcome, refusal, occurred_at)
		VALUES (?, ?, ?, ?, ?, ?::jsonb, ?::jsonb, ?, ?, ?, ?)
		ON CONFLICT (event_id) DO NOTHING`,
		c.EventID, c.QueueID, c.Actor, c.Address, c.Action, jsonOrNull(c.Before), jsonOrNull(c.After), c.ETag, c.Outcome, c.Refusal, c.At)
	if res.Error != nil {
		return false, wrap(ctx, "save queue change", res.Error)
	}
	return res.RowsAffected == 1, nil
}

// Changes lists the changes f picks, newest first (by time, then id), from
// after on, at most limit.
func (d *DB) Changes(ctx context.Context, f audit.Filter, after *audit.Cursor, limit int) ([]audit.Change, error) {
	tctx, cancel := d.timeout(ctx)
	defer cancel()
	var where []string
	var args []any
	if f.QueueID != "" {
		where, args = append(where, "queue_id = ?"), append(args, f.QueueID)
	}
	if !f.Since.IsZero() {
		where, args = append(where, "occurred_at >= ?"), append(args, f.Since)
	}
	if !f.Until.IsZero() {
		where, args = append(where, "occurred_at < ?"), append(args, f.Until)
	}
	if after != nil {
		where, args = append(where, "(occurred_at, event_id) < (?, ?)"), append(args, after.At, after.EventID)
	}
	q := `SELECT event_id, queue_id, actor, client_address, action, before_knobs, after_knobs, etag, outcome, refusal, occurred_at FROM queue_changes`
	if len(where) > 0 {
		q += " WHERE " + strings.Join(where, " AND ")
	}
	q += " ORDER BY occurred_at DESC, event_id DESC LIMIT ?"
	args = append(args, limit)
	rows, err := d.conn(tctx).Raw(q, args...).Rows()
	if err != nil {
		return nil, wrap(ctx, "list queue changes", err)
	}
	defer rows.Close()
	var out []audit.Change
	for rows.Next() {
		var c audit.Change
		var before, after []byte
		if err := rows.Scan(&c.EventID, &c.QueueID, &c.Actor, &c.Address, &c.Action, &before, &after, &c.ETag, &c.Outcome, &c.Refusal, &c.At); err != nil {
			return nil, wrap(ctx, "list queue changes", err)
		}
		if before != nil {
			c.Before = json.RawMessage(before)
		}
		if after != nil {
			c.After = json.RawMessage(after)
		}
		c.At = c.At.UTC()
		out = append(out, c)
	}
	if err := rows.Err(); err != nil {
		return nil, wrap(ctx, "list queue changes", err)
	}
	return out, nil
}

// jsonOrNull is a JSON document for a jsonb parameter, or SQL NULL.
func jsonOrNull(j json.RawMessage) any {
	if len(j) == 0 {
		return nil
	}
	return string(j)
}
