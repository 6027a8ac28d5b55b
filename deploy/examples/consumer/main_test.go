package main

import (
	"bytes"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	v1 "github.com/waitingroom/waitingroom/pkg/events/waitingroomv1"
)

// lockedBuffer is a bytes.Buffer a process writes while the test reads it.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// TestMainStopsOnSIGTERM builds the program, runs it against the broker
// with flags, has it handle an order and a TokensIssued of two tokens (each
// logged as a TokenIssued), and stops it with SIGTERM: it exits 0, saying
// what it did, and leaves its queue empty with no consumer.
func TestMainStopsOnSIGTERM(t *testing.T) {
	br := newBroker(t)
	bin := filepath.Join(t.TempDir(), "consumer")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	cmd := exec.Command(bin, "-amqp-url", br.url, "-exchange", br.exchange, "-queue", br.queue, "-bind", "order.created,order.failed,tokens.issued")
	var logs lockedBuffer
	cmd.Stderr = &logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() { _ = cmd.Process.Kill() })

	br.waitConsumers(t, br.queue, 1)
	br.publish(t, "order.created", event(t, &v1.OrderCreated{EventId: "o1.created", OccurredAt: ts(), QueueId: "sale", UserId: "u1", OrderId: "o1", ProductId: "sku-1", Quantity: 3}))
	waitFor(t, "the order logged", func() bool {
		return strings.Contains(logs.String(), `msg="order created" id=o1.created traceparent=00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01 order_id=o1 queue_id=sale product_id=sku-1 quantity=3`)
	})
	// A TokensIssued is logged a token at a time, as a TokenIssued is.
	br.publish(t, "tokens.issued", event(t, &v1.TokensIssued{EventId: "t1.issued.batch", OccurredAt: ts(), QueueId: "sale", Tokens: []*v1.TokenIssued{
		{EventId: "t1.issued", OccurredAt: ts(), QueueId: "sale", UserId: "u1", TokenId: "t1", Sequence: 7},
		{EventId: "t2.issued", OccurredAt: ts(), QueueId: "sale", UserId: "u2", TokenId: "t2", Sequence: 9},
	}}))
	waitFor(t, "both tokens logged", func() bool {
		return strings.Contains(logs.String(), `msg="token issued" id=t2.issued traceparent=00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01 user_id=u2 sequence=9 batch=t1.issued.batch`)
	})
	if want := `msg="token issued" id=t1.issued traceparent=00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01 user_id=u1 sequence=7 batch=t1.issued.batch`; !strings.Contains(logs.String(), want) {
		t.Errorf("log has no %q:\n%s", want, logs.String())
	}
	if i, j := strings.Index(logs.String(), "id=t1.issued "), strings.Index(logs.String(), "id=t2.issued "); i < 0 || j < i {
		t.Errorf("tokens logged out of their order:\n%s", logs.String())
	}
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-exited:
		if err != nil {
			t.Fatalf("exit after SIGTERM: %v\n%s", err, logs.String())
		}
	case <-time.After(10 * time.Second):
		t.Fatalf("still running 10 s after SIGTERM\n%s", logs.String())
	}
	if want := `msg=stopped handled=3 duplicates=0 ignored=0 rejected=0 retried=0`; !strings.Contains(logs.String(), want) {
		t.Errorf("log has no %q:\n%s", want, logs.String())
	}
	if strings.Contains(logs.String(), "guest:guest") {
		t.Errorf("the log shows the broker's password:\n%s", logs.String())
	}
	if m, cons, ok := br.inspect(t, br.queue); !ok || m != 0 || cons != 0 {
		t.Errorf("queue after the stop: %d messages, %d consumers (exists %v), want empty and unconsumed", m, cons, ok)
	}
}
