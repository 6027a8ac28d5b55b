package testenv

import (
	"bufio"
	"errors"
	"io"
	"net"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"
)

// startEcho runs a line echo server until the test ends.
func startEcho(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	var conns []net.Conn
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
			wg.Add(1)
			go func() {
				defer wg.Done()
				_, _ = io.Copy(c, c)
			}()
		}
	}()
	t.Cleanup(func() {
		_ = ln.Close()
		mu.Lock()
		for _, c := range conns {
			_ = c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	return ln.Addr().String()
}

func echo(c net.Conn, line string) (string, error) {
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := io.WriteString(c, line+"\n"); err != nil {
		return "", err
	}
	got, err := bufio.NewReader(c).ReadString('\n')
	return strings.TrimSuffix(got, "\n"), err
}

func dialEcho(t *testing.T, addr string) net.Conn {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatalf("dial proxy: %v", err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// closedByPeer waits for c to report EOF or a reset (not a timeout).
func closedByPeer(c net.Conn) error {
	_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
	_, err := c.Read(make([]byte, 1))
	var ne net.Error
	if err == nil {
		return errors.New("read succeeded")
	}
	if errors.As(err, &ne) && ne.Timeout() {
		return err
	}
	return nil
}

func TestProxyForwardsCutsAndRestores(t *testing.T) {
	t.Parallel()
	p := StartProxy(t, startEcho(t))

	a := dialEcho(t, p.Addr())
	if got, err := echo(a, "one"); err != nil || got != "one" {
		t.Fatalf("echo through proxy = %q, %v; want one", got, err)
	}

	p.Cut()
	if err := closedByPeer(a); err != nil {
		t.Fatalf("open connection after Cut: %v, want closed by the proxy", err)
	}
	b := dialEcho(t, p.Addr())
	if err := closedByPeer(b); err != nil {
		t.Fatalf("new connection while cut: %v, want closed at once", err)
	}

	p.Restore()
	c := dialEcho(t, p.Addr())
	for i, line := range []string{"two", "three"} {
		if got, err := echo(c, line); err != nil || got != line {
			t.Fatalf("echo %d after Restore = %q, %v; want %q", i, got, err, line)
		}
	}
}

func TestProxyStopLeavesNoGoroutines(t *testing.T) {
	// Not parallel: it counts the goroutines of the whole process.
	before := runtime.NumGoroutine()
	t.Run("use", func(t *testing.T) {
		p := StartProxy(t, startEcho(t))
		for i := range 3 {
			c := dialEcho(t, p.Addr())
			if got, err := echo(c, "x"); err != nil || got != "x" {
				t.Fatalf("echo %d = %q, %v", i, got, err)
			}
		}
		p.Cut()
	})
	deadline := time.Now().Add(5 * time.Second)
	for runtime.NumGoroutine() > before && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if n := runtime.NumGoroutine(); n > before {
		buf := make([]byte, 1<<16)
		t.Fatalf("%d goroutines after the proxy stopped, %d before:\n%s", n, before, buf[:runtime.Stack(buf, true)])
	}
}

func TestAMQPURLAnswers(t *testing.T) {
	t.Parallel()
	if err := pingAMQP(AMQPURL(t)); err != nil {
		t.Fatalf("AMQPURL does not answer: %v", err)
	}
}
