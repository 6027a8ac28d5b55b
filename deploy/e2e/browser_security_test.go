package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/waitingroom/waitingroom/pkg/auth"
)

// The page under abuse: a link that carries someone else's identity, and a
// queue that makes each browser prove some work before it enters.

// A #token= link can carry anyone's identity (login CSRF). Opened where
// alice is signed in, a link for mallory leaves alice stored and sends
// nothing under mallory until the person clicks to use it; keeping alice
// sends nothing under mallory at all; using it makes the page mallory's.
func browserLinkIdentity(t *testing.T, s *browserSystem, browser context.Context, q string) {
	s.queue(q, map[string]any{"state": "PAUSED"})
	mallory, err := s.ver.Mint("mallory-link", "", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	page := s.gateway.URL + "/q/" + q
	tb := newTab(t, browser, "link")
	sent := tb.recordRequests()
	tb.navigate(page)
	tb.signIn("alice-link")
	alice := eval[string](tb, `localStorage.token || ''`)
	if alice == "" || sent.count(carrying(alice)) == 0 {
		t.Fatalf("alice signed in, but the page stores %q and sent %d requests with it", alice, sent.count(carrying(alice)))
	}

	// opened follows the link as a new load and waits until the page has
	// either asked or gone on under some identity.
	opened := func() pageState {
		tb.navigate("about:blank")
		tb.navigate(page + "#token=" + mallory)
		st := tb.waitFor("the question or the line", 10*time.Second, func(p pageState) bool {
			return p.Shown["switch"] || p.Shown["enter"] || p.Shown["figures"]
		})
		// A page that went ahead under mallory does so in its first poll:
		// give it the time to show.
		time.Sleep(time.Second)
		return st
	}

	aliceBefore := sent.count(carrying(alice))
	st := opened()
	stored := eval[string](tb, `localStorage.token || ''`)
	if stored != alice || sent.count(carrying(mallory)) != 0 {
		t.Fatalf("after the link: the stored identity is %s, %d requests carried mallory's token; want alice's, 0",
			map[bool]string{true: "alice's", false: "not alice's"}[stored == alice], sent.count(carrying(mallory)))
	}
	if !st.Shown["switch"] || st.Shown["line"] || st.Shown["identity"] || st.LinkUser != "mallory-link" ||
		st.CurrentUser != "alice-link" || !st.Shown["current-note"] ||
		st.UseLink != "Continue as mallory-link" || st.KeepIdentity != "Stay signed in as alice-link" {
		t.Fatalf("the question about the link: %v (buttons %q / %q)", st, st.UseLink, st.KeepIdentity)
	}
	if n := sent.count(carrying(alice)) - aliceBefore; n != 0 {
		t.Fatalf("while asking, the page sent %d requests as alice, want 0", n)
	}
	if hash := eval[string](tb, `location.hash`); hash != "" {
		t.Fatalf("the token is still in the address bar: %q", hash)
	}
	if focused := eval[string](tb, `document.activeElement.id`); focused != "switch-h" {
		t.Fatalf("focus on %q, want the question's heading", focused)
	}
	tb.shot("link-question")

	// Keep alice: the page goes on as alice, mallory's token is never sent.
	tb.click("keep-identity")
	st = tb.waitFor("the Enter button as alice", 10*time.Second, func(p pageState) bool { return p.Shown["enter"] && !p.Shown["switch"] })
	if got := eval[string](tb, `localStorage.token || ''`); got != alice || sent.count(carrying(mallory)) != 0 || sent.count(carrying(alice)) <= aliceBefore {
		t.Fatalf("kept alice: stored is alice's %v, %d requests as mallory (want 0), %d more as alice (want > 0)",
			got == alice, sent.count(carrying(mallory)), sent.count(carrying(alice))-aliceBefore)
	}
	tb.shot("kept-alice")

	// The same link again, and this time use it.
	aliceBefore = sent.count(carrying(alice))
	st = opened()
	if !st.Shown["switch"] || sent.count(carrying(mallory)) != 0 || sent.count(carrying(alice)) != aliceBefore {
		t.Fatalf("the link again: %v; %d requests as mallory, %d more as alice, want 0 and 0",
			st, sent.count(carrying(mallory)), sent.count(carrying(alice))-aliceBefore)
	}
	tb.click("use-link")
	tb.waitFor("the Enter button as mallory", 10*time.Second, func(p pageState) bool { return p.Shown["enter"] && !p.Shown["switch"] })
	if got := eval[string](tb, `localStorage.token || ''`); got != mallory || sent.count(carrying(mallory)) == 0 {
		t.Fatalf("used the link: stored is mallory's %v, %d requests as mallory (want > 0)", got == mallory, sent.count(carrying(mallory)))
	}
	tb.click("enter")
	tb.waitFor("place 1", 10*time.Second, func(p pageState) bool { return p.Shown["figures"] && p.Position == "1" })
	if m, a := s.position(q, "mallory-link"), s.position(q, "alice-link"); m["state"] != "WAITING" || m["position"] != 1.0 || a["state"] != "NOT_IN_QUEUE" {
		t.Fatalf("the gateway has mallory %v at %v and alice %v; want mallory waiting at 1, alice not in line", m["state"], m["position"], a["state"])
	}
	tb.shot("used-link")

	// A link followed while the page is open only changes the fragment (no
	// new load): asked all the same, and kept, nothing goes out as alice.
	aliceBefore = sent.count(carrying(alice))
	tb.do(chromedp.Evaluate[chromedp.Void](`location.hash = '#token=` + alice + `'`))
	st = tb.waitFor("the question in the open page", 10*time.Second, func(p pageState) bool { return p.Shown["switch"] })
	if st.LinkUser != "alice-link" || st.CurrentUser != "mallory-link" || eval[string](tb, `location.hash`) != "" {
		t.Fatalf("a link in the open page: %v", st)
	}
	tb.click("keep-identity")
	st = tb.waitFor("the question gone", 5*time.Second, func(p pageState) bool { return !p.Shown["switch"] })
	time.Sleep(time.Second)
	if got := eval[string](tb, `localStorage.token || ''`); got != mallory || sent.count(carrying(alice)) != aliceBefore || !st.Shown["figures"] {
		t.Fatalf("kept mallory in the open page: stored is mallory's %v, %d more requests as alice (want 0); page %v",
			got == mallory, sent.count(carrying(alice))-aliceBefore, st)
	}
	t.Logf("requests: %d as alice, %d as mallory (all of them after the click)", sent.count(carrying(alice)), sent.count(carrying(mallory)))
}

// A queue that asks for proof of work: the page fetches a challenge, solves
// it in its worker while the note tells the progress, and enters with the
// solution in one request. A reload finds the buyer in line without a
// second challenge.
func browserEnterChallenge(t *testing.T, s *browserSystem, browser context.Context, q string) {
	const bits = 18 // 2^18 hashes expected: under a second in headless chromium here
	s.queue(q, map[string]any{"state": "PAUSED", "enterChallenge": "PROOF_OF_WORK", "powDifficultyBits": bits})
	const buyer = "shopper-pow"
	tb := newTab(t, browser, "challenge")
	sent := tb.recordRequests()
	tb.recordNotes()
	tb.navigate(s.gateway.URL + "/q/" + q)
	tb.signIn(buyer)
	began := time.Now()
	tb.click("enter")
	st := tb.waitFor("place 1", 60*time.Second, func(p pageState) bool { return p.Shown["figures"] && p.Position == "1" })
	took := time.Since(began)
	if st.Shown["check"] || st.Ahead != "0" {
		t.Fatalf("in line after the check: %v", st)
	}
	tb.shot("in-line")

	notes := eval[[]string](tb, `window.checkNotes`)
	note := regexp.MustCompile(`^Checking your browser… (\d+)% of the expected work$`)
	if len(notes) == 0 {
		t.Fatal("the page never showed the browser-check note")
	}
	// The note starts at 0 % and only goes up.
	last := -1
	for _, n := range notes {
		m := note.FindStringSubmatch(n)
		if m == nil || atoi(m[1]) <= last || (last == -1 && m[1] != "0") {
			t.Fatalf("check notes %q: want %s from 0 %% upwards", notes, note)
		}
		last = atoi(m[1])
	}

	enters := func(r sentRequest) bool {
		return r.method == http.MethodPost && strings.HasSuffix(r.url, "/api/v1/queues/"+q+"/enter")
	}
	solved := func(r sentRequest) bool { return enters(r) && r.headers["x-enter-challenge"] != "" }
	challenges := func(r sentRequest) bool {
		return r.method == http.MethodPost && strings.HasSuffix(r.url, "/api/v1/queues/"+q+"/challenge")
	}
	withSolution := sent.matching(solved)
	if len(withSolution) != 1 || sent.count(enters) != 2 || sent.count(challenges) != 1 {
		t.Fatalf("enter requests %d (want 2: refused, then solved), with X-Enter-Challenge %d (want 1), challenge requests %d (want 1)",
			sent.count(enters), len(withSolution), sent.count(challenges))
	}
	if h := withSolution[0].headers["x-enter-challenge"]; !regexp.MustCompile(`^[A-Za-z0-9_.~-]+:[0-9]{1,20}$`).MatchString(h) {
		t.Fatalf("X-Enter-Challenge %q, want challenge:nonce", h)
	}
	p := s.position(q, buyer)
	code, stats := s.call(http.MethodGet, s.gateway.URL+"/api/v1/queues/"+q, buyer, "", nil)
	if p["state"] != "WAITING" || p["position"] != 1.0 || code != http.StatusOK || stats["waiting"] != 1.0 {
		t.Fatalf("the gateway: buyer %v at %v, queue %d waiting %v; want WAITING at 1 and 1 waiting", p["state"], p["position"], code, stats["waiting"])
	}
	t.Logf("%d-bit challenge solved and entered in %s; notes shown: %q", bits, took.Round(time.Millisecond), notes)

	// A reload resumes the place: no second challenge, no second solution.
	tb.do(chromedp.Reload())
	tb.waitFor("place 1 after a reload", 10*time.Second, func(p pageState) bool { return p.Shown["figures"] && p.Position == "1" })
	if sent.count(challenges) != 1 || sent.count(solved) != 1 {
		t.Fatalf("after a reload: %d challenge requests, %d solutions sent; want 1 and 1", sent.count(challenges), sent.count(solved))
	}
}

// The gateway refuses a solution for less than the queue's current
// difficulty (the operator raised it while the browser worked): the page
// fetches one fresh challenge and enters with it. Refused twice in one
// attempt, it stops and offers Enter again. The test holds each solved
// enter in the browser and raises the difficulty before letting it go.
func browserChallengeRefused(t *testing.T, s *browserSystem, browser context.Context, q string) {
	bits := 14
	s.queue(q, map[string]any{"state": "PAUSED", "enterChallenge": "PROOF_OF_WORK", "powDifficultyBits": bits})
	enters := func(r sentRequest) bool {
		return r.method == http.MethodPost && strings.HasSuffix(r.url, "/queues/"+q+"/enter")
	}
	solved := func(r sentRequest) bool { return enters(r) && r.headers["x-enter-challenge"] != "" }
	challenges := func(r sentRequest) bool {
		return r.method == http.MethodPost && strings.HasSuffix(r.url, "/queues/"+q+"/challenge")
	}

	// try enters as buyer, raising the difficulty before each of the first
	// raises solved enters reaches the gateway.
	try := func(buyer string, raises int) (*tab, *requestLog) {
		tb := newTab(t, browser, buyer)
		sent := tb.recordRequests()
		var mu sync.Mutex
		var errs []error
		tb.holdRequests("*/api/v1/queues/"+q+"/enter", func(r sentRequest) {
			if !solved(r) {
				return
			}
			mu.Lock()
			defer mu.Unlock()
			if raises == 0 {
				return
			}
			raises--
			bits++
			errs = append(errs, s.knobs(q, map[string]any{"powDifficultyBits": bits}))
		})
		tb.navigate(s.gateway.URL + "/q/" + q)
		tb.signIn(buyer)
		tb.click("enter")
		tb.waitFor("the end of the attempt", 60*time.Second, func(p pageState) bool {
			return p.Shown["figures"] || (p.Shown["enter"] && p.Kind == "error")
		})
		mu.Lock()
		defer mu.Unlock()
		if err := errors.Join(errs...); err != nil {
			t.Fatalf("raising the difficulty: %v", err)
		}
		return tb, sent
	}

	tb, sent := try("shopper-raised-once", 1)
	if p := s.position(q, "shopper-raised-once"); p["state"] != "WAITING" || p["position"] != 1.0 ||
		sent.count(challenges) != 2 || sent.count(solved) != 2 || sent.count(enters) != 3 {
		t.Fatalf("refused once: the gateway has the buyer %v at %v; %d challenges, %d solved enters, %d enters; want WAITING at 1, 2, 2, 3",
			p["state"], p["position"], sent.count(challenges), sent.count(solved), sent.count(enters))
	}
	tb.shot("refused-once-in-line")

	tb, sent = try("shopper-raised-twice", 2)
	st := tb.waitFor("the Enter button", time.Second, func(p pageState) bool { return p.Shown["enter"] && !p.EnterDisabled })
	if p := s.position(q, "shopper-raised-twice"); p["state"] != "NOT_IN_QUEUE" || st.Status != "The check of your browser was not accepted. Try again." ||
		sent.count(challenges) != 2 || sent.count(solved) != 2 || sent.count(enters) != 3 || st.Shown["check"] {
		t.Fatalf("refused twice: the gateway has the buyer %v; the page shows %v; %d challenges, %d solved enters, %d enters; want NOT_IN_QUEUE, 2, 2, 3",
			p["state"], st, sent.count(challenges), sent.count(solved), sent.count(enters))
	}
	tb.shot("refused-twice")
	tb.audit("challenge-refused")
	t.Logf("difficulty raised from 14 to %d bits along the way", bits)
}

// knobs changes a queue's knobs without failing the test: for code that runs
// off the test's goroutine.
func (s *browserSystem) knobs(q string, knobs map[string]any) error {
	tok, err := s.ver.Mint("ops", auth.RoleAdmin, time.Hour)
	if err != nil {
		return err
	}
	b, err := json.Marshal(knobs)
	if err != nil {
		return err
	}
	req, err := http.NewRequest(http.MethodPut, s.gateway.URL+"/admin/v1/queues/"+q, bytes.NewReader(b))
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+tok)
	req.Header.Set("Content-Type", "application/json")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		body, _ := io.ReadAll(res.Body)
		return fmt.Errorf("PUT knobs %v: %d %s", knobs, res.StatusCode, body)
	}
	return nil
}
