package e2e

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/waitingroom/waitingroom/pkg/testenv"
)

// `make run | tee log`, then Ctrl-C: the terminal sends SIGINT to the whole
// foreground group, tee dies first, and deploy/local/run.sh has to stop its
// services with nowhere left to write. Each case runs the script on ports,
// binaries, a queue, an exchange and a database of its own, reads its output
// until the stack is up, closes the reading end (tee is gone), holds a
// request open at the gateway (so its graceful stop takes seconds), signals
// the script's process group and counts what is left: no service process,
// no helper process of the script, no listening port. The exit statuses the
// script reports say how each service ended: 0 is a graceful stop (neither
// killed early nor dead of SIGPIPE, 141, on the gone output).
func TestRunScriptStopsEveryServiceWhenItsOutputIsGone(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		// signals go to the script's process group; each one after the
		// first once the script has said it is stopping.
		signals []syscall.Signal
		exit    int   // the script's exit status
		allowed []int // the services' exit statuses the script may report
		killed  int   // how many of them at least were killed (SIGKILL, 137)
		stop    runTimeouts
	}{
		{"ctrl-c", []syscall.Signal{syscall.SIGINT}, 130, []int{0}, 0, drained},
		// The second Ctrl-C lands while the gateway still drains the held
		// request, however slow the machine is to send it: the request
		// may take 100 s. The script kills what is left instead of dying.
		{"ctrl-c twice", []syscall.Signal{syscall.SIGINT, syscall.SIGINT}, 130, []int{0, 137}, 1, draining},
		{"terminal closed", []syscall.Signal{syscall.SIGHUP}, 129, []int{0}, 0, drained},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := startUpRunScript(t, tc.stop)
			if got := r.processes(); len(got.services) != len(testenv.Services) {
				t.Fatalf("the script runs %d service processes (%v), want %d; stderr:\n%s",
					len(got.services), got.services, len(testenv.Services), r.stderr())
			}
			if n := r.listening(); n != len(r.ports) {
				t.Fatalf("%d of the %d ports listen before the signal, want all; stderr:\n%s", n, len(r.ports), r.stderr())
			}
			held := r.holdGatewayRequest()
			defer held.Close()

			r.out.Close() // the reader (tee) is gone
			r.signal(tc.signals)
			exit := r.waitExit()

			left, ports := r.processes(), r.listening()
			for deadline := time.Now().Add(10 * time.Second); (left.any() || ports > 0) && time.Now().Before(deadline); {
				time.Sleep(100 * time.Millisecond)
				left, ports = r.processes(), r.listening()
			}
			if len(left.services) != 0 || len(left.helpers) != 0 || ports != 0 {
				t.Fatalf("after the script exited: %d service processes left %v, %d helper processes left %v, %d of %d ports still listening; stderr:\n%s",
					len(left.services), left.services, len(left.helpers), left.helpers, ports, len(r.ports), r.stderr())
			}
			if exit != tc.exit {
				t.Errorf("the script exited with %d, want %d; stderr:\n%s", exit, tc.exit, r.stderr())
			}
			statuses := r.reportedStatuses()
			inAllowed, killed := 0, 0
			for _, st := range statuses {
				if slices.Contains(tc.allowed, st) {
					inAllowed++
				}
				if st == 137 {
					killed++
				}
			}
			if len(statuses) != len(testenv.Services) || inAllowed != len(statuses) || killed < tc.killed {
				t.Errorf("the script reported %d exits %v, %d of them in %v, %d killed; want %d, all in %v, at least %d killed; stderr:\n%s",
					len(statuses), statuses, inAllowed, tc.allowed, killed, len(testenv.Services), tc.allowed, tc.killed, r.stderr())
			}
			t.Logf("exit %d, services' exits %v, 0 processes and 0 of %d ports left", exit, statuses, len(r.ports))
		})
	}
}

// runScript is deploy/local/run.sh started the way a shell starts the
// foreground job `make run | tee log`: a process group of its own, stdout a
// pipe whose other end the test reads.
type runScript struct {
	t      *testing.T
	cmd    *exec.Cmd
	out    *os.File // the reading end of the script's stdout
	errLog string   // the script's stderr (the terminal, which outlives tee)
	bin    string
	marker string // KEY=value in the environment of everything it starts
	ports  []int
	gw     int           // the gateway's API port
	queue  string        // the demo queue it creates (DEMO_QUEUE)
	stop   time.Duration // its STOP_TIMEOUT
	done   chan struct{}
	err    error // the script's exit, once done is closed
}

// runTimeouts are how long the script and its services wait when stopping.
type runTimeouts struct {
	stop     time.Duration // the script's STOP_TIMEOUT, then it kills
	shutdown time.Duration // the services' SHUTDOWN_TIMEOUT
	read     time.Duration // their HTTP_READ_TIMEOUT (and HTTP_WRITE_TIMEOUT): the held request's life
}

var (
	// drained: STOP_TIMEOUT above SHUTDOWN_TIMEOUT above HTTP_READ_TIMEOUT,
	// so the held request ends (and the gateway exits 0) before anything
	// is killed.
	drained = runTimeouts{stop: 40 * time.Second, shutdown: 20 * time.Second, read: 8 * time.Second}
	// draining: the held request outlives any delay of a busy machine
	// between the first signal and the next.
	draining = runTimeouts{stop: 150 * time.Second, shutdown: 120 * time.Second, read: 100 * time.Second}
)

func startRunScript(t *testing.T, stop runTimeouts) *runScript {
	t.Helper()
	id := testenv.ID(t)
	exchange := "e2e." + id
	amqpURL, redisURL := testenv.AMQPURL(t), testenv.RedisURL(t)
	t.Cleanup(func() {
		testenv.DeleteAMQPTopology(amqpURL, exchange, exchange+".order-failed", exchange+".order-failed.dlq", exchange+".queue-changes", exchange+".queue-changes.dlq")
	})
	testenv.PurgeAtCleanup(t, redisURL, id)
	r := &runScript{t: t, stop: stop.stop, bin: testenv.BuildServices(t), marker: "WAITINGROOM_RUN_SCRIPT_TEST=" + id, done: make(chan struct{})}
	portVars := []string{"GATEWAY_PORT", "ORDERS_PORT", "NOTIFICATIONS_PORT",
		"GATEWAY_OPS_PORT", "ORDERS_OPS_PORT", "NOTIFICATIONS_OPS_PORT", "DISPATCHER_OPS_PORT"}
	env := []string{r.marker, "BIN_DIR=" + r.bin, "DEMO_QUEUE=" + id, "DISPATCH_QUEUES=" + id,
		"REDIS_URL=" + redisURL, "AMQP_URL=" + amqpURL, "AMQP_EXCHANGE=" + exchange, "ORDER_FAILED_QUEUE=" + exchange + ".order-failed", "QUEUE_CHANGES_QUEUE=" + exchange + ".queue-changes",
		"DATABASE_URL=" + testenv.PostgresURL(t),
		fmt.Sprintf("STOP_TIMEOUT=%d", int(stop.stop.Seconds())), "SHUTDOWN_TIMEOUT=" + stop.shutdown.String(),
		"HTTP_READ_TIMEOUT=" + stop.read.String(), "HTTP_WRITE_TIMEOUT=" + stop.read.String()}
	for _, v := range portVars {
		p := testenv.FreePort(t)
		r.ports = append(r.ports, p)
		env = append(env, fmt.Sprintf("%s=%d", v, p))
	}
	r.gw, r.queue = r.ports[0], id

	stdout, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	errLog, err := os.Create(filepath.Join(t.TempDir(), "stderr"))
	if err != nil {
		t.Fatal(err)
	}
	r.out, r.errLog = stdout, errLog.Name()
	// env resets the signals a terminal's job gets with their default
	// action: a test binary started in the background has SIGINT ignored,
	// and a shell cannot trap a signal that was ignored when it started.
	r.cmd = exec.Command("env", "--default-signal=INT,QUIT,HUP,TERM,PIPE", "bash", filepath.Join(testenv.Root(), "deploy", "local", "run.sh"))
	// GATEWAY and ORDERS would override the addresses the ports make.
	r.cmd.Env = append(slices.DeleteFunc(os.Environ(), func(kv string) bool {
		return strings.HasPrefix(kv, "GATEWAY=") || strings.HasPrefix(kv, "ORDERS=")
	}), env...)
	r.cmd.Stdout, r.cmd.Stderr = w, errLog
	r.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	err = r.cmd.Start()
	_ = w.Close()
	_ = errLog.Close()
	if err != nil {
		_ = stdout.Close()
		t.Fatal(err)
	}
	go func() { r.err = r.cmd.Wait(); close(r.done) }()
	t.Cleanup(r.killLeftovers)
	return r
}

// startUpRunScript starts the script and reads its output until it says
// the stack is up. The ports come from testenv.FreePort, which another
// test running in parallel may take before the script's service binds it:
// the service then exits 1 with "address already in use" (and the script
// talks to the other test's service), so the script runs again on new
// ports, up to three times.
func startUpRunScript(t *testing.T, stop runTimeouts) *runScript {
	t.Helper()
	for attempt := 1; ; attempt++ {
		r := startRunScript(t, stop)
		err := r.readUntilUp()
		switch {
		case err == nil:
			return r
		case strings.Contains(err.Error(), "address already in use") && attempt < 3:
			t.Logf("attempt %d: a port was taken before the script's service bound it; again on new ports", attempt)
			r.killLeftovers()
		default:
			t.Fatalf("the script never said the stack was up: %v; stderr:\n%s", err, r.stderr())
		}
	}
}

// readUntilUp reads the script's output until it says the stack is up; the
// error carries the output read when it does not.
func (r *runScript) readUntilUp() error {
	r.t.Helper()
	up := make(chan error, 1)
	go func() {
		var seen strings.Builder
		sc := bufio.NewScanner(r.out)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			if strings.Contains(sc.Text(), "waiting room is up") {
				up <- nil
				return
			}
			if seen.Len() < 64<<10 {
				seen.WriteString(sc.Text() + "\n")
			}
		}
		up <- fmt.Errorf("its output ended (%v) after:\n%s", sc.Err(), seen.String())
	}()
	select {
	case err := <-up:
		return err
	case <-time.After(3 * time.Minute):
		r.out.Close()
		return errors.New("it did not say so within 3 minutes")
	}
}

// holdGatewayRequest starts a request at the gateway whose body never
// comes, so its graceful shutdown waits for HTTP_READ_TIMEOUT. It returns
// once the handler reads the body (the server's "100 Continue" says so): a
// connection still in the listen backlog would not hold the shutdown.
func (r *runScript) holdGatewayRequest() net.Conn {
	r.t.Helper()
	c, err := net.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", r.gw))
	if err != nil {
		r.t.Fatal(err)
	}
	if _, err := fmt.Fprint(c, "POST /api/v1/dev/token HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"+
		"Content-Length: 1000\r\nExpect: 100-continue\r\n\r\n"); err != nil {
		r.t.Fatal(err)
	}
	_ = c.SetReadDeadline(time.Now().Add(30 * time.Second))
	status, err := bufio.NewReader(c).ReadString('\n')
	if err != nil || !strings.Contains(status, " 100 ") {
		r.t.Fatalf("the gateway answered %q (%v) to a request expecting 100-continue", status, err)
	}
	_ = c.SetReadDeadline(time.Time{})
	return c
}

// signal sends each signal to the script's process group, as a terminal
// does to its foreground job; after the first, it waits until the script
// says it is stopping.
func (r *runScript) signal(sigs []syscall.Signal) {
	r.t.Helper()
	for i, sig := range sigs {
		if i > 0 {
			r.waitStopping(sigs[0])
		}
		// ESRCH: the group is gone already (a script that died of the first).
		if err := syscall.Kill(-r.cmd.Process.Pid, sig); err != nil && !errors.Is(err, syscall.ESRCH) {
			r.t.Fatalf("%v to the script's group: %v", sig, err)
		}
	}
}

// waitStopping waits until the script says it is stopping, or has exited
// (then the counts after it tell what it left).
func (r *runScript) waitStopping(first syscall.Signal) {
	r.t.Helper()
	deadline := time.After(30 * time.Second)
	for !strings.Contains(r.stderr(), "stopping") {
		select {
		case <-r.done:
			return
		case <-deadline:
			r.t.Fatalf("the script neither said it was stopping nor exited within 30s of %v; stderr:\n%s", first, r.stderr())
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// waitExit waits for the script to exit and returns its exit status (128+n
// when a signal n ended it).
func (r *runScript) waitExit() int {
	r.t.Helper()
	select {
	case <-r.done:
	case <-time.After(r.stop + 30*time.Second):
		r.t.Fatalf("the script did not exit within %v of the signal; stderr:\n%s", r.stop+30*time.Second, r.stderr())
	}
	st := r.cmd.ProcessState.Sys().(syscall.WaitStatus)
	if st.Signaled() {
		return 128 + int(st.Signal())
	}
	return st.ExitStatus()
}

// leftover is what runs with the script's marker in its environment.
type leftover struct {
	services []string // name:pid, the service binaries
	helpers  []int    // everything else: the script, its log prefixers
}

func (l leftover) any() bool { return len(l.services)+len(l.helpers) > 0 }

// processes lists the live processes started by this script, found by the
// marker in their environment.
func (r *runScript) processes() leftover {
	var l leftover
	dirs, _ := filepath.Glob("/proc/[0-9]*")
	for _, d := range dirs {
		env, err := os.ReadFile(d + "/environ")
		if err != nil || !slices.ContainsFunc(bytes.Split(env, []byte{0}), func(kv []byte) bool { return string(kv) == r.marker }) {
			continue
		}
		pid, _ := strconv.Atoi(filepath.Base(d))
		if exe, _ := os.Readlink(d + "/exe"); filepath.Dir(exe) == r.bin {
			l.services = append(l.services, fmt.Sprintf("%s:%d", filepath.Base(exe), pid))
		} else {
			l.helpers = append(l.helpers, pid)
		}
	}
	return l
}

// listening counts the script's ports that accept a connection.
func (r *runScript) listening() int {
	n := 0
	for _, p := range r.ports {
		if c, err := net.DialTimeout("tcp", fmt.Sprintf("127.0.0.1:%d", p), time.Second); err == nil {
			_ = c.Close()
			n++
		}
	}
	return n
}

var exitLine = regexp.MustCompile(`(?m)^(\S+) exited with status (\d+)$`)

// reportedStatuses are the services' exit statuses the script printed.
func (r *runScript) reportedStatuses() []int {
	var out []int
	for _, m := range exitLine.FindAllStringSubmatch(r.stderr(), -1) {
		n, _ := strconv.Atoi(m[2])
		out = append(out, n)
	}
	return out
}

func (r *runScript) stderr() string {
	b, _ := os.ReadFile(r.errLog)
	return string(b)
}

// killLeftovers kills whatever of the script's still runs, so a failing
// case leaves no process and no taken port behind.
func (r *runScript) killLeftovers() {
	_ = syscall.Kill(-r.cmd.Process.Pid, syscall.SIGKILL)
	l := r.processes()
	for _, s := range l.services {
		_, pid, _ := strings.Cut(s, ":")
		n, _ := strconv.Atoi(pid)
		_ = syscall.Kill(n, syscall.SIGKILL)
	}
	for _, pid := range l.helpers {
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
	_ = r.out.Close()
	<-r.done
}
