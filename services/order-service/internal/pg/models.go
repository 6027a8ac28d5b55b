package pg

import (
	"time"

	"github.com/waitingroom/waitingroom/services/order-service/internal/order"
)

// The gorm models mirror migrations/; the domain types stay free of tags.

type productRow struct {
	ID         string `gorm:"primaryKey"`
	QueueID    string
	Name       string
	Stock      int
	PriceCents int64
	UpdatedAt  time.Time
}

func (productRow) TableName() string { return "products" }

func (r productRow) product() order.Product {
	return order.Product{ID: r.ID, QueueID: r.QueueID, Name: r.Name, Stock: r.Stock,
		PriceCents: r.PriceCents, UpdatedAt: r.UpdatedAt.UTC()}
}

type orderRow struct {
	ID             string `gorm:"primaryKey"`
	UserID         string
	QueueID        string
	ProductID      string
	Quantity       int
	EntryTokenID   string
	IdempotencyKey *string // NULL when none was sent: the unique index ignores it
	Status         string
	CreatedAt      time.Time
	Bypassed       bool
}

func (orderRow) TableName() string { return "orders" }

func (r orderRow) order() order.Order {
	o := order.Order{ID: r.ID, UserID: r.UserID, QueueID: r.QueueID, ProductID: r.ProductID,
		Quantity: r.Quantity, EntryTokenID: r.EntryTokenID, Status: r.Status, CreatedAt: r.CreatedAt.UTC(), Bypassed: r.Bypassed}
	if r.IdempotencyKey != nil {
		o.IdempotencyKey = *r.IdempotencyKey
	}
	return o
}

type outboxRow struct {
	ID         int64 `gorm:"primaryKey"`
	EventID    string
	RoutingKey string
	Type       string
	Payload    []byte
	OccurredAt time.Time
	CreatedAt  time.Time
	SentAt     *time.Time
	// The W3C trace context the event was written in ('' for none).
	Traceparent, Tracestate string
}

func (outboxRow) TableName() string { return "outbox" }

func (r outboxRow) event() order.OutboxEvent {
	return order.OutboxEvent{EventID: r.EventID, RoutingKey: r.RoutingKey, Type: r.Type,
		Payload: r.Payload, OccurredAt: r.OccurredAt.UTC(), TraceParent: r.Traceparent, TraceState: r.Tracestate}
}

type idempotencyRow struct {
	UserID    string `gorm:"primaryKey"`
	Key       string `gorm:"primaryKey"`
	Status    *int   // NULL while the first request runs
	Body      []byte
	CreatedAt time.Time
}

func (idempotencyRow) TableName() string { return "idempotency" }
