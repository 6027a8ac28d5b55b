package chaos

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/waitingroom/waitingroom/pkg/events"
	v1 "github.com/waitingroom/waitingroom/pkg/events/waitingroomv1"
	"github.com/waitingroom/waitingroom/pkg/testenv"
)

// rabbitNode is a private RabbitMQ node (its own node name, ports, mnesia,
// logs and Erlang cookie under t.TempDir()); the shared broker is never stopped.
type rabbitNode struct {
	t          *testing.T
	node, dir  string
	port, dist int
	cmd        *exec.Cmd
	done       chan struct{}
}

const rabbitBin = "/usr/lib/rabbitmq/bin/" // the /usr/sbin wrappers su to the rabbitmq user

func startRabbit(t *testing.T) *rabbitNode {
	if _, err := os.Stat(rabbitBin + "rabbitmq-server"); err != nil {
		t.Fatalf("this drill runs its own RabbitMQ node: apt-get install -y rabbitmq-server (%v)", err)
	}
	dir := t.TempDir()
	n := &rabbitNode{t: t, dir: dir, port: testenv.FreePort(t), dist: testenv.FreePort(t)}
	n.node = fmt.Sprintf("chaos-%d@localhost", n.port)
	for _, d := range []string{"mnesia", "log"} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	_ = os.WriteFile(filepath.Join(dir, "plugins"), nil, 0o644)
	_ = os.WriteFile(filepath.Join(dir, "rabbitmq.conf"), []byte(fmt.Sprintf("listeners.tcp.default = %d\n", n.port)), 0o644)
	n.Start()
	t.Cleanup(func() { n.Stop(); n.kill() })
	return n
}

func (n *rabbitNode) URL() string { return fmt.Sprintf("amqp://guest:guest@127.0.0.1:%d/", n.port) }

func (n *rabbitNode) env() []string {
	return append(os.Environ(), "HOME="+n.dir, "RABBITMQ_NODENAME="+n.node,
		fmt.Sprintf("RABBITMQ_NODE_PORT=%d", n.port), fmt.Sprintf("RABBITMQ_DIST_PORT=%d", n.dist),
		"RABBITMQ_MNESIA_BASE="+filepath.Join(n.dir, "mnesia"), "RABBITMQ_LOG_BASE="+filepath.Join(n.dir, "log"),
		"RABBITMQ_CONFIG_FILE="+filepath.Join(n.dir, "rabbitmq.conf"), "RABBITMQ_ENABLED_PLUGINS_FILE="+filepath.Join(n.dir, "plugins"))
}

// Start (re)starts the node and waits until AMQP answers.
func (n *rabbitNode) Start() {
	n.t.Helper()
	out, err := os.OpenFile(filepath.Join(n.dir, "server.out"), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		n.t.Fatal(err)
	}
	cmd := exec.Command(rabbitBin + "rabbitmq-server")
	cmd.Dir, cmd.Env, cmd.Stdout, cmd.Stderr = n.dir, n.env(), out, out
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		n.t.Fatal(err)
	}
	n.cmd, n.done = cmd, make(chan struct{})
	go func() { _ = cmd.Wait(); _ = out.Close(); close(n.done) }()
	// Three minutes: booting Erlang on two cores busy with the rest of
	// make test has taken over one.
	deadline := time.Now().Add(3 * time.Minute)
	for {
		if c, err := amqp.Dial(n.URL()); err == nil {
			_ = c.Close()
			return
		}
		if time.Now().After(deadline) {
			b, _ := os.ReadFile(filepath.Join(n.dir, "server.out"))
			n.t.Fatalf("private RabbitMQ %s did not answer within 3 minutes:\n%s", n.node, b)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// Stop stops the node with rabbitmqctl and waits for the process to exit.
func (n *rabbitNode) Stop() {
	if n.cmd == nil {
		return
	}
	cmd := exec.Command(rabbitBin+"rabbitmqctl", "-n", n.node, "stop")
	cmd.Env = n.env()
	if out, err := cmd.CombinedOutput(); err != nil {
		n.t.Logf("rabbitmqctl stop: %v\n%s", err, out)
	}
	select {
	case <-n.done:
		n.cmd = nil
	case <-time.After(20 * time.Second):
		n.kill()
	}
}

// kill ends the node's process group by PID (also epmd children started by it).
func (n *rabbitNode) kill() {
	if n.cmd == nil {
		return
	}
	_ = syscall.Kill(-n.cmd.Process.Pid, syscall.SIGKILL)
	<-n.done
	n.cmd = nil
}

// TestRabbitMQRestartDuringAdmissionAndOrders restarts a private RabbitMQ
// node while users are admitted and order: every TokenIssued, OrderCreated
// and OrderFailed reaches a durable listener queue at least once.
func TestRabbitMQRestartDuringAdmissionAndOrders(t *testing.T) {
	t.Parallel()
	node := startRabbit(t)
	r := newRig(t)
	r.redisURL, r.amqpURL, r.dbURL = testenv.RedisURL(t), node.URL(), testenv.PostgresURL(t)
	rdb := testenv.Redis(t)
	db := pgConn(t, r.dbURL)
	ctx := context.Background()
	l := r.listen(r.amqpURL)

	nUsers := testenv.Pick(200, 600)
	stock := nUsers * 3 / 4
	gw := start(t, "queue-gateway", r.env(nil), true)
	ord := start(t, "order-service", r.env(nil), true)
	start(t, "admission-dispatcher", r.env(nil), true)
	r.createQueue(gw.URL, 50)
	r.createProduct(ord.URL, stock)
	users := userNames("b", nUsers)

	// Each user orders as soon as a token is in Redis, retrying 503s.
	buyers := r.newBuying(ord.URL, rdb, 90*time.Second)
	for _, u := range users {
		buyers.add(u)
	}
	buyers.closeWhenDone()
	entered := make(chan struct{})
	go func() { defer close(entered); r.enterAll(gw.URL, users, 50) }()

	if !eventually(60*time.Second, func() bool { return issuedTotal(t, rdb, r.q) >= nUsers/2 }) {
		t.Fatalf("issued %d, want %d before the restart", issuedTotal(t, rdb, r.q), nUsers/2)
	}
	down := time.Now()
	node.Stop()
	node.Start()
	gap := time.Since(down)
	<-entered
	outcome := buyers.wait()
	for _, err := range outcome.errs {
		t.Error(err)
	}
	created, soldOut, retried := outcome.created, outcome.soldOut, outcome.retried

	issued := issuedTotal(t, rdb, r.q)
	outbox := func(key string) map[string]bool { return outboxIDs(t, db, key) }
	var orders int
	if err := db.QueryRow(ctx, "SELECT count(*) FROM orders WHERE queue_id = $1", r.q).Scan(&orders); err != nil {
		t.Fatal(err)
	}
	var dupOrders int
	if err := db.QueryRow(ctx, "SELECT count(*) FROM (SELECT user_id FROM orders GROUP BY user_id HAVING count(*) > 1) d").Scan(&dupOrders); err != nil {
		t.Fatal(err)
	}
	wantCreated, wantFailed := outbox(events.RoutingKeyOrderCreated), outbox(events.RoutingKeyOrderFailed)
	tokens := func() map[string]bool {
		out := map[string]bool{}
		for _, e := range l.byKey(events.RoutingKeyTokenIssued) {
			if m, ok := e.msg.(*v1.TokenIssued); ok && m.GetQueueId() == r.q {
				out[m.GetTokenId()] = true
			}
		}
		return out
	}
	missing := func(want map[string]bool, got map[string]event) int {
		n := 0
		for id := range want {
			if _, ok := got[id]; !ok {
				n++
			}
		}
		return n
	}
	eventually(30*time.Second, func() bool {
		return len(tokens()) >= issued && missing(wantCreated, l.distinct(events.RoutingKeyOrderCreated)) == 0 &&
			missing(wantFailed, l.distinct(events.RoutingKeyOrderFailed)) == 0
	})
	lostTokens := issued - len(tokens())
	lostCreated := missing(wantCreated, l.distinct(events.RoutingKeyOrderCreated))
	lostFailed := missing(wantFailed, l.distinct(events.RoutingKeyOrderFailed))
	lost := lostTokens + lostCreated + lostFailed
	ok := len(tokens()) + len(wantCreated) - lostCreated + len(wantFailed) - lostFailed
	// Every sold-out answer is one SOLD_OUT OrderFailed; any other failure is
	// a restorable one (a timeout or database error under load) that the
	// user saw as 503 or no answer and retried.
	soldOutEvents, otherFailures := 0, map[string]int{}
	for _, e := range l.distinct(events.RoutingKeyOrderFailed) {
		m, isFailed := e.msg.(*v1.OrderFailed)
		switch {
		case !isFailed || m.GetQueueId() != r.q:
		case m.GetReason() == v1.OrderFailureReason_ORDER_FAILURE_REASON_SOLD_OUT:
			soldOutEvents++
		case !m.GetRestorable():
			t.Errorf("OrderFailed %s: %s is not restorable", e.messageID, m.GetReason())
		default:
			otherFailures[m.GetReason().String()]++
		}
	}
	others := 0
	for _, n := range otherFailures {
		others += n
	}
	t.Logf("issued=%d TokenIssued delivered=%d; orders=%d created=%d outbox OrderCreated=%d; sold out=%d outbox OrderFailed=%d (SOLD_OUT %d, restorable %v after %d retried attempts); deliveries=%d; broker down for %s",
		issued, len(tokens()), orders, created, len(wantCreated), soldOut, len(wantFailed), soldOutEvents, otherFailures, retried,
		len(l.byKey(events.RoutingKeyTokenIssued))+len(l.byKey(events.RoutingKeyOrderCreated))+len(l.byKey(events.RoutingKeyOrderFailed)), gap)
	summary(t, "rabbitmq-restart", ok, lost, dupOrders, 1, gap)
	if lost != 0 || dupOrders != 0 || issued != nUsers || orders != stock || created != stock || soldOut != nUsers-stock ||
		len(wantCreated) != stock || soldOutEvents != nUsers-stock || others > retried {
		t.Fatalf("lost=%d (tokens %d created %d failed %d) dup=%d issued=%d orders=%d created=%d soldOut=%d outbox created=%d; SOLD_OUT events=%d, restorable failures=%d for %d retried attempts; want issued=%d orders=%d sold out=%d, restorable failures <= retried attempts",
			lost, lostTokens, lostCreated, lostFailed, dupOrders, issued, orders, created, soldOut, len(wantCreated), soldOutEvents, others, retried, nUsers, stock, nUsers-stock)
	}
}
