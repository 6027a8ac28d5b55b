package queue_test

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/waitingroom/waitingroom/pkg/queue"
	"github.com/waitingroom/waitingroom/pkg/queue/queuetest"
)

// TestDrawOrderIsUniformAndIgnoresArrival: over 200 fixed seeds (so the
// figures are the same on every run), 300 people who entered in id order
// are drawn with no relation to it: the rank correlation averages 0 and
// stays under 0.15 for at least 97 % of the seeds (about 99 % for a
// uniform permutation); the first tenth to arrive gets an average drawn
// place of the middle; the order does not depend on the order ids are
// given in.
func TestDrawOrderIsUniformAndIgnoresArrival(t *testing.T) {
	users := make([]string, 300)
	for i := range users {
		users[i] = fmt.Sprintf("user-%03d", i)
	}
	const seeds = 200
	var sumRho, earlyRank float64
	under := 0
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range seeds {
		sum := sha256.Sum256([]byte(fmt.Sprintf("seed-%d", i)))
		seed := hex.EncodeToString(sum[:])
		order, err := queue.DrawOrder(seed, users)
		if err != nil {
			t.Fatal(err)
		}
		rho := queuetest.SpearmanRho(users, order)
		sumRho += rho
		if math.Abs(rho) < 0.15 {
			under++
		}
		for j, u := range order {
			if slices.Index(users, u) < 30 {
				earlyRank += float64(j)
			}
		}
		shuffled := slices.Clone(users)
		rng.Shuffle(len(shuffled), func(a, b int) { shuffled[a], shuffled[b] = shuffled[b], shuffled[a] })
		if again, _ := queue.DrawOrder(seed, shuffled); !slices.Equal(again, order) {
			t.Fatalf("seed %d: the order depends on the order ids were given in", i)
		}
	}
	mean := sumRho / seeds
	early := earlyRank / (seeds * 30)
	t.Logf("mean rho %.4f, %d of %d seeds |rho| < 0.15, first tenth's mean drawn place %.1f (middle 149.5)", mean, under, seeds, early)
	if math.Abs(mean) > 0.02 {
		t.Errorf("mean Spearman rho %.4f over %d seeds, want within ±0.02", mean, seeds)
	}
	if under < seeds*97/100 {
		t.Errorf("%d of %d seeds with |rho| < 0.15, want at least 97 %%", under, seeds)
	}
	if math.Abs(early-149.5) > 6 {
		t.Errorf("the first 30 to arrive got mean drawn place %.1f, want 149.5 ± 6", early)
	}
}

// TestManyAccountsGetTheirShareOfTheDraw: a scalper pre-queues 100
// accounts among 900 people, all of them (ids a bot picks, "bot-000".. ,
// beside ordinary ones) before the start. Over 200 fixed seeds its
// accounts get on average their share of the first 100 drawn places, 10
// (within ±1), and more than 20 of them in no draw: more accounts buy
// more lottery tickets, not better ones, and the ids they chose do not
// help.
func TestManyAccountsGetTheirShareOfTheDraw(t *testing.T) {
	var users []string
	for i := range 900 {
		users = append(users, fmt.Sprintf("user-%03d", i))
	}
	for i := range 100 {
		users = append(users, fmt.Sprintf("bot-%03d", i))
	}
	const seeds, head = 200, 100
	total, most := 0, 0
	for i := range seeds {
		sum := sha256.Sum256([]byte(fmt.Sprintf("accounts-seed-%d", i)))
		order, err := queue.DrawOrder(hex.EncodeToString(sum[:]), users)
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for _, u := range order[:head] {
			if strings.HasPrefix(u, "bot-") {
				n++
			}
		}
		total += n
		most = max(most, n)
	}
	mean := float64(total) / seeds
	t.Logf("the scalper's 100 of 1,000 accounts: %.2f of the first %d places on average, at most %d", mean, head, most)
	if math.Abs(mean-10) > 1 || most > 20 {
		t.Fatalf("the scalper's accounts got %.2f of the first %d places on average (at most %d), want 10 ± 1 and never more than 20", mean, head, most)
	}
}
