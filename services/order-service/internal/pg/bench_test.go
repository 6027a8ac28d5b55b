package pg_test

import (
	"bufio"
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/waitingroom/waitingroom/pkg/testenv"
	"github.com/waitingroom/waitingroom/services/order-service/internal/order"
	"github.com/waitingroom/waitingroom/services/order-service/internal/pg"
)

// hotClients is how many orders are in flight at once, in every run: the
// default pool's size, and pgbench's clients.
const hotClients = 40

// BenchmarkHotRowSideBySide is the flash sale's worst case, every order on
// one product row, measured three ways one after another on the same row
// of the same server: the order path with group commit, the order path
// with a transaction an order (GroupCommit 1: the path before group
// commit), and pgbench's bare conditional UPDATE of the row. Each runs
// closed-loop with hotClients in flight for BENCH_HOTROW_SECONDS (default
// 10) for its maximum, then open-loop at 80 % of that maximum for its
// latency (p50/p99 from each order's scheduled start, so a stall counts
// for every order it delays). It ignores b.N: run it with -benchtime 1x.
func BenchmarkHotRowSideBySide(b *testing.B) {
	if _, err := exec.LookPath("pgbench"); err != nil {
		b.Fatalf("pgbench is not installed (apt-get install postgresql-client, or make bench, which installs it): %v", err)
	}
	secs := 10
	if s := os.Getenv("BENCH_HOTROW_SECONDS"); s != "" {
		var err error
		if secs, err = strconv.Atoi(s); err != nil || secs < 1 {
			b.Fatalf("BENCH_HOTROW_SECONDS=%q: want a positive number of seconds", s)
		}
	}
	window := time.Duration(secs) * time.Second
	dsn := testenv.PostgresURL(b)
	raw := rawDB(b, dsn)
	open := func(group int) *pg.DB {
		o := testOptions(b)
		o.MaxOpenConns, o.GroupCommit = hotClients, group
		// Waits on the row lock beyond the slow-statement mark are the
		// point here, not news.
		o.Log = slog.New(slog.NewTextHandler(b.Output(), &slog.HandlerOptions{Level: slog.LevelError}))
		return open(b, dsn, o)
	}
	grouped, alone := open(64), open(1)
	p := mustUpsert(b, grouped, product("hot", "q1", 1_000_000_000))

	var seq atomic.Int64
	place := func(db *pg.DB) func() error {
		return func() error {
			n := int(seq.Add(1))
			_, err := db.PlaceOrder(context.Background(), order.Placement{Order: newOrder(p, n, 1), Event: createdEvent})
			return err
		}
	}
	vacuum := func() {
		if _, err := raw.Exec(`VACUUM ANALYZE products, orders, outbox, user_order_counts`); err != nil {
			b.Fatal(err)
		}
	}
	b.ResetTimer()
	vacuum()
	aloneMax := closedLoop(b, place(alone), window)
	vacuum()
	aloneAt80 := openLoop(b, place(alone), 0.8*aloneMax, window)
	vacuum()
	groupMax := closedLoop(b, place(grouped), window)
	vacuum()
	groupAt80 := openLoop(b, place(grouped), 0.8*groupMax, window)
	vacuum()
	bareMax, _ := pgbench(b, dsn, 0, window)
	vacuum()
	_, bareAt80 := pgbench(b, dsn, 0.8*bareMax, window)
	b.StopTimer()

	if taken, orders := 1_000_000_000-count(b, raw, `SELECT stock FROM products WHERE id = 'hot'`),
		count(b, raw, `SELECT count(*) FROM orders`); orders == 0 || taken < orders {
		b.Fatalf("%d orders stored and %d of the stock taken", orders, taken)
	}
	b.ReportMetric(groupMax, "group-orders/s")
	b.ReportMetric(aloneMax, "alone-orders/s")
	b.ReportMetric(bareMax, "pgbench-tps")
	b.ReportMetric(groupMax/bareMax, "group/pgbench")
	b.ReportMetric(groupMax/aloneMax, "group/alone")
	for _, m := range []struct {
		name string
		lat  []time.Duration
	}{{"group", groupAt80}, {"alone", aloneAt80}, {"pgbench", bareAt80}} {
		b.ReportMetric(ms(percentile(m.lat, 50)), m.name+"-p50-ms@80%")
		b.ReportMetric(ms(percentile(m.lat, 99)), m.name+"-p99-ms@80%")
	}
}

// closedLoop runs do from hotClients goroutines for window and returns the
// completions a second; every error fails the benchmark.
func closedLoop(b *testing.B, do func() error, window time.Duration) float64 {
	var (
		done atomic.Int64
		wg   sync.WaitGroup
		errs = make([]error, hotClients)
	)
	end := time.Now().Add(window)
	start := time.Now()
	for i := range hotClients {
		wg.Go(func() {
			for time.Now().Before(end) {
				if err := do(); err != nil {
					errs[i] = err
					return
				}
				done.Add(1)
			}
		})
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			b.Fatalf("client %d: %v", i, err)
		}
	}
	return float64(done.Load()) / time.Since(start).Seconds()
}

// openLoop starts do at rate a second for window, whatever the earlier
// ones are doing, and returns each one's latency from its scheduled start.
func openLoop(b *testing.B, do func() error, rate float64, window time.Duration) []time.Duration {
	n := int(rate * window.Seconds())
	gap := time.Duration(float64(time.Second) / rate)
	lat, errs := make([]time.Duration, n), make([]error, n)
	var wg sync.WaitGroup
	start := time.Now()
	for i := range n {
		at := start.Add(time.Duration(i) * gap)
		time.Sleep(time.Until(at))
		wg.Go(func() {
			errs[i] = do()
			lat[i] = time.Since(at)
		})
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			b.Fatalf("order %d at %.0f/s: %v", i, rate, err)
		}
	}
	return lat
}

// pgbench runs pgbench's conditional UPDATE of the product row with
// hotClients clients for window: at full speed (rate 0) for its tps, or at
// rate for the latency of each transaction (from its scheduled start, as
// pgbench measures under --rate).
func pgbench(b *testing.B, dsn string, rate float64, window time.Duration) (float64, []time.Duration) {
	dir := b.TempDir()
	script := filepath.Join(dir, "hot.sql")
	if err := os.WriteFile(script, []byte("UPDATE products SET stock = stock - 1 WHERE id = 'hot' AND queue_id = 'q1' AND stock > 0;\n"), 0o600); err != nil {
		b.Fatal(err)
	}
	args := []string{"-n", "-c", strconv.Itoa(hotClients), "-j", "2", "-T", strconv.Itoa(int(window.Seconds())), "-f", script}
	if rate > 0 {
		args = append(args, "-R", fmt.Sprintf("%.0f", rate), "-l", "--log-prefix", filepath.Join(dir, "log"))
	}
	cmd := exec.Command("pgbench", append(args, dsn)...)
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	if err != nil {
		b.Fatalf("pgbench %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	m := regexp.MustCompile(`(?m)^tps = ([0-9.]+)`).FindSubmatch(out)
	if m == nil {
		b.Fatalf("pgbench printed no tps:\n%s", out)
	}
	tps, _ := strconv.ParseFloat(string(m[1]), 64)
	if rate == 0 {
		return tps, nil
	}
	logs, _ := filepath.Glob(filepath.Join(dir, "log.*"))
	var lat []time.Duration
	for _, name := range logs {
		lat = append(lat, pgbenchLatencies(b, name)...)
	}
	if len(lat) == 0 {
		b.Fatalf("pgbench logged no transactions in %s:\n%s", dir, out)
	}
	return tps, lat
}

// pgbenchLatencies reads a pgbench transaction log: "client_id
// transaction_no time script_no time_epoch time_us [schedule_lag]", time
// in microseconds (with --rate, from the scheduled start).
func pgbenchLatencies(b *testing.B, name string) []time.Duration {
	f, err := os.Open(name)
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	var lat []time.Duration
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 3 {
			continue
		}
		us, err := strconv.ParseInt(fields[2], 10, 64)
		if err != nil {
			continue // "skipped" transactions (none without --latency-limit)
		}
		lat = append(lat, time.Duration(us)*time.Microsecond)
	}
	if err := sc.Err(); err != nil {
		b.Fatal(err)
	}
	return lat
}

func percentile(lat []time.Duration, p int) time.Duration {
	s := slices.Clone(lat)
	slices.Sort(s)
	return s[min(len(s)-1, len(s)*p/100)]
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
