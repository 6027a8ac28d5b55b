package chaos

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/waitingroom/waitingroom/pkg/testenv"
)

// TestJunkFloodNeverOpensFailOpen: a queue that fails OPEN, Redis healthy,
// and one login flooding the order-service with made-up tokens for 10 items
// from many connections at once (long form: 9,000 connections for 15 s,
// the finding's; short form: 300 for 3 s) while admitted buyers order. The
// flood may be refused in any way (403, 429, 503) but never let through:
// 0 bypassed orders, 0 orders from junk, and every admitted buyer ordered
// (201 once, after retries at the service's Retry-After).
func TestJunkFloodNeverOpensFailOpen(t *testing.T) {
	t.Parallel()
	conns, flood := testenv.Pick(300, 9000), time.Duration(testenv.Pick(3, 15))*time.Second
	r := newRig(t)
	r.redisURL, r.amqpURL, r.dbURL = testenv.RedisURL(t), testenv.AMQPURL(t), testenv.PostgresURL(t)
	r.deleteTopology()
	keys := map[string]string{"ENTRY_TOKEN_KEYS": "chaos-entry-token-key-0123456789abcdef"}
	gw := start(t, "queue-gateway", r.env(keys), true)
	ord := start(t, "order-service", r.env(keys), true)
	start(t, "admission-dispatcher", r.env(keys), true)
	if res := r.call(http.MethodPut, gw.URL+"/admin/v1/queues/"+r.q, "ops", "admin", "",
		map[string]any{"admissionRatePerSec": 100, "activationSpreadMs": 0, "failMode": "OPEN"}); res.status != http.StatusCreated {
		t.Fatalf("create queue: %d %v", res.status, res.body)
	}
	r.createProduct(ord.URL, 100_000)
	buyers := userNames("buyer", 20)
	toks := r.admitAll(gw.URL, buyers)

	tr := &http.Transport{MaxIdleConnsPerHost: conns, MaxConnsPerHost: conns, DialContext: (&net.Dialer{Timeout: 5 * time.Second}).DialContext}
	defer tr.CloseIdleConnections()
	flooder := &http.Client{Transport: tr, Timeout: 10 * time.Second}
	jwt, err := r.ver.Mint("mallory", "", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	body := `{"queueId":"` + r.q + `","productId":"tee","quantity":10}`
	var (
		mu      sync.Mutex
		by      = map[int]int{}
		failed  int
		wg      sync.WaitGroup
		stop    = make(chan struct{})
		started = time.Now()
	)
	for i := range conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			secret := fmt.Sprintf("%032x", i+1)
			for {
				select {
				case <-stop:
					return
				default:
				}
				req, _ := http.NewRequest(http.MethodPost, ord.URL+"/api/v1/orders", strings.NewReader(body))
				req.Header.Set("Authorization", "Bearer "+jwt)
				req.Header.Set("X-Entry-Token", secret)
				req.Header.Set("Content-Type", "application/json")
				res, err := flooder.Do(req)
				mu.Lock()
				if err != nil {
					failed++
				} else {
					by[res.StatusCode]++
				}
				mu.Unlock()
				if err == nil {
					_ = res.Body.Close()
				} else {
					time.Sleep(50 * time.Millisecond)
				}
			}
		}()
	}
	// The buyers order during the flood, each until one answer is final.
	buyerAnswers := map[string]int{}
	for _, u := range buyers {
		deadline := time.Now().Add(flood + 30*time.Second)
		for {
			res := r.order(ord.URL, u, toks[u][0])
			if res.status == http.StatusCreated || (res.status != http.StatusServiceUnavailable && res.status != http.StatusTooManyRequests && res.status != 0) {
				buyerAnswers[strconv.Itoa(res.status)]++
				break
			}
			if time.Now().After(deadline) {
				buyerAnswers["gave up"]++
				break
			}
			wait := time.Second
			if s, err := strconv.Atoi(res.header.Get("Retry-After")); err == nil && s > 0 {
				wait = time.Duration(s) * time.Second
			}
			time.Sleep(wait)
		}
	}
	if rest := flood - time.Since(started); rest > 0 {
		time.Sleep(rest)
	}
	close(stop)
	wg.Wait()
	took := time.Since(started)

	db := pgConn(t, r.dbURL)
	var bypassed, junk, orders int
	if err := db.QueryRow(context.Background(),
		`SELECT count(*) FILTER (WHERE bypassed), count(*) FILTER (WHERE user_id = 'mallory'), count(*) FROM orders WHERE queue_id = $1`, r.q).
		Scan(&bypassed, &junk, &orders); err != nil {
		t.Fatal(err)
	}
	total := failed
	for _, n := range by {
		total += n
	}
	t.Logf("%d connections of junk for %v: %d requests (%.0f/s) answered %v, %d without an answer; buyers %v; orders %d, bypassed %d, junk %d",
		conns, took.Round(time.Millisecond), total, float64(total)/took.Seconds(), by, failed, buyerAnswers, orders, bypassed, junk)
	for status := range by {
		if status != http.StatusForbidden && status != http.StatusTooManyRequests && status != http.StatusServiceUnavailable {
			t.Errorf("junk answered %d (%d times): want only 403, 429 or 503", status, by[status])
		}
	}
	if bypassed != 0 || junk != 0 {
		t.Errorf("%d bypassed orders and %d orders from junk, want 0 and 0", bypassed, junk)
	}
	if buyerAnswers["201"] != len(buyers) || orders != len(buyers) {
		t.Errorf("buyers %v, %d orders; want %d 201 and as many orders", buyerAnswers, orders, len(buyers))
	}
	summary(t, "junk flood on a FAIL_OPEN queue", buyerAnswers["201"], len(buyers)-buyerAnswers["201"], bypassed+junk, 0, 0)
}
