package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/waitingroom/waitingroom/pkg/testenv"
)

// tourHeading is the README section whose sh blocks are the tour.
const tourHeading = "## A five-minute tour"

// TestReadmeTourAsPasted runs the README's five-minute tour as a reader
// pastes it: the sh blocks under its heading, in order, in one bash with
// -euo pipefail, against deploy/local/run.sh (what make run starts) on
// ports, a queue, an exchange and a database of the test's own, named to
// the blocks by GW, ORDERS, NOTIFY and Q. The tour must end with exit 0,
// after showing the person ADMITTED, an order answered 201 CREATED and the
// place ORDERED.
func TestReadmeTourAsPasted(t *testing.T) {
	t.Parallel()
	tour := tourScript(t, filepath.Join(testenv.Root(), "README.md"))
	r := startUpRunScript(t, drained)
	// Nobody reads the services' log lines, but a full pipe would stall them.
	runLog := filepath.Join(t.TempDir(), "run.log")
	logf, err := os.Create(runLog)
	if err != nil {
		t.Fatal(err)
	}
	copied := make(chan struct{})
	go func() { _, _ = io.Copy(logf, r.out); _ = logf.Close(); close(copied) }()
	defer func() {
		r.signal([]syscall.Signal{syscall.SIGINT})
		r.waitExit()
		<-copied
	}()

	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", "-euo", "pipefail", "-c", tour)
	cmd.Dir = t.TempDir()
	cmd.Env = append(os.Environ(),
		fmt.Sprintf("GW=http://127.0.0.1:%d", r.ports[0]),
		fmt.Sprintf("ORDERS=http://127.0.0.1:%d", r.ports[1]),
		fmt.Sprintf("NOTIFY=http://127.0.0.1:%d", r.ports[2]),
		"Q="+r.queue)
	out, err := cmd.CombinedOutput()
	failf := func(format string, args ...any) {
		t.Helper()
		b, _ := os.ReadFile(runLog)
		t.Fatalf(format+"\nthe tour's output:\n%s\nmake run's stderr:\n%s\nthe services' log (tail):\n%s",
			append(args, out, r.stderr(), tail(string(b), 8000))...)
	}
	if err != nil {
		failf("the tour failed: %v", err)
	}
	admitted, order, ordered := tourResults(string(out))
	if !admitted {
		failf("the tour never showed the person ADMITTED")
	}
	if order.code != 201 || order.body["status"] != "CREATED" {
		failf("the order was answered %d %v, want 201 with status CREATED", order.code, order.body)
	}
	if !ordered {
		failf("the place did not say ORDERED after the order")
	}
	if !strings.Contains(string(out), `{"actor":"ops1","action":"CONFIGURED","outcome":"APPLIED"}`) {
		failf("the operator's change was not found in the audit trail")
	}
	t.Logf("the tour's output:\n%s", out)
}

// tourScript is the sh blocks under tourHeading in the markdown file at
// path, joined in order; it fails the test when there are none.
func tourScript(t *testing.T, path string) string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var script strings.Builder
	in, inBlock, blocks := false, false, 0
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case inBlock && line == "```":
			inBlock = false
		case inBlock:
			script.WriteString(line + "\n")
		case line == tourHeading:
			in = true
		case in && strings.HasPrefix(line, "## "):
			in = false
		case in && line == "```sh":
			inBlock = true
			blocks++
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if blocks == 0 {
		t.Fatalf("%s has no sh block under %q", path, tourHeading)
	}
	return script.String()
}

// orderAnswer is the line the tour prints for the order: the body, a
// space and the status code.
type orderAnswer struct {
	code int
	body map[string]any
}

var orderLine = regexp.MustCompile(`^(\{.*\}) (\d{3})$`)

// tourResults reads the tour's output: whether a position answer said
// ADMITTED with a token, the order's answer, and whether a position
// answer after it said ORDERED.
func tourResults(out string) (admitted bool, order orderAnswer, ordered bool) {
	for _, line := range strings.Split(out, "\n") {
		if m := orderLine.FindStringSubmatch(line); m != nil {
			_, _ = fmt.Sscan(m[2], &order.code)
			_ = json.Unmarshal([]byte(m[1]), &order.body)
			continue
		}
		var v map[string]any
		if json.Unmarshal([]byte(line), &v) != nil {
			continue
		}
		switch {
		case v["state"] == "ADMITTED" && v["token"] != nil:
			admitted = true
		case v["state"] == "ORDERED" && order.code != 0:
			ordered = true
		}
	}
	return admitted, order, ordered
}

// tail is the last n bytes of s.
func tail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[len(s)-n:]
}
