// Command consumer is an example consumer of the waiting room's events, for
// a team to copy: it uses github.com/rabbitmq/amqp091-go directly (no
// waiting-room library but the generated event types), declares its own
// durable queue, binds it to the waitingroom.events topic exchange, and
// handles each event once by its id, acking after the handling.
//
//	go run ./deploy/examples/consumer -queue loyalty.waitingroom-events -bind 'order.*,token.issued,tokens.issued'
//
// Bind tokens.issued wherever you bind token.issued (the pattern token.*
// does not match it): an admission-dispatcher run with TOKEN_EVENTS=batch
// publishes a queue's admissions as one TokensIssued there instead of a
// TokenIssued a person. The consumer hands each of its tokens to the
// handler as a TokenIssued, deduplicated by the token's own event id.
//
// It stops on SIGINT or SIGTERM, after the event in hand. docs/EVENTS.md
// describes the events; deploy/examples/README.md this program.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"

	amqp "github.com/rabbitmq/amqp091-go"

	v1 "github.com/waitingroom/waitingroom/pkg/events/waitingroomv1"
)

func main() {
	ctx, done := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	err := realMain(ctx, os.Args[1:], os.Stderr)
	done()
	if err != nil {
		fmt.Fprintln(os.Stderr, "consumer:", err)
		os.Exit(1)
	}
}

func realMain(ctx context.Context, args []string, stderr io.Writer) error {
	url := os.Getenv("AMQP_URL")
	if url == "" {
		url = "amqp://guest:guest@127.0.0.1:5672/"
	}
	fs := flag.NewFlagSet("consumer", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&url, "amqp-url", url, "RabbitMQ URL (default: $AMQP_URL, else the local broker)")
	exchange := fs.String("exchange", "waitingroom.events", "the waiting room's topic exchange")
	queue := fs.String("queue", "example.waitingroom-events", "your durable queue: <your service>.<purpose>")
	bind := fs.String("bind", "order.*", "routing keys or patterns to bind, comma-separated")
	prefetch := fs.Int("prefetch", 50, "deliveries the broker sends ahead of the acks")
	seen := fs.Int("seen", 100_000, "event ids the in-memory store remembers")
	if err := fs.Parse(args); err != nil {
		return err
	}
	log := slog.New(slog.NewTextHandler(stderr, nil))
	cfg := Config{URL: url, Exchange: *exchange, Queue: *queue, Bindings: strings.Split(*bind, ","), Prefetch: *prefetch}
	c, err := NewConsumer(cfg, NewMemory(*seen), logEvent(log), log)
	if err != nil {
		return err
	}
	if u, err := amqp.ParseURI(url); err == nil { // host and vhost only: the password stays out of the log
		log.Info("starting", "broker", fmt.Sprintf("%s:%d", u.Host, u.Port), "vhost", u.Vhost)
	}
	err = c.Run(ctx)
	log.Info("stopped", "handled", c.Stats.Handled.Load(), "duplicates", c.Stats.Duplicates.Load(),
		"ignored", c.Stats.Ignored.Load(), "rejected", c.Stats.Rejected.Load(), "retried", c.Stats.Retried.Load())
	return err
}

// logEvent is the example's handling: it logs the event. Yours writes to
// your database, in the transaction that remembers the event id (see Memory).
func logEvent(log *slog.Logger) Handler {
	return func(_ context.Context, e Event) error {
		log := log.With("id", e.ID, "traceparent", e.TraceParent)
		switch m := e.Message.(type) {
		case *v1.OrderCreated:
			log.Info("order created", "order_id", m.GetOrderId(), "queue_id", m.GetQueueId(),
				"product_id", m.GetProductId(), "quantity", m.GetQuantity(), "bypassed", m.GetBypassed())
		case *v1.OrderFailed:
			log.Info("order failed", "order_id", m.GetOrderId(), "reason", m.GetReason().String(), "restorable", m.GetRestorable())
		case *v1.TokenIssued: // alone, or a token of a TokensIssued (e.Batch)
			attrs := []any{"user_id", m.GetUserId(), "sequence", m.GetSequence()}
			if e.Batch != "" {
				attrs = append(attrs, "batch", e.Batch)
			}
			log.Info("token issued", attrs...)
		default:
			log.Info("event", "type", e.Type)
		}
		return nil
	}
}
