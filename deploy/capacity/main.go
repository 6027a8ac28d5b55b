// Command capacity sizes the waiting room for a target (people waiting,
// polls, enters, admissions, open streams) from the per-core figures that
// `make bench` measured and wrote to docs/benchmarks.json: replicas, cores
// and memory of each component, the figure each is sized by, where its next
// wall is, and which measured figure every assumption came from. `make
// capacity` runs it from the repository root.
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"time"
)

func main() {
	err := realMain(os.Args[1:], os.Stdout)
	if errors.Is(err, flag.ErrHelp) {
		return
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "capacity:", err)
		os.Exit(2)
	}
}

// realMain reads the flags and the figures and prints the plan to out.
func realMain(args []string, out io.Writer) error {
	t, figures, err := parse(args)
	if err != nil {
		return err
	}
	f, err := loadFigures(figures)
	if err != nil {
		return err
	}
	return report(out, figures, f, size(f, t))
}

// parse reads the target and the figures file's path from args.
func parse(args []string) (Target, string, error) {
	fs := flag.NewFlagSet("capacity", flag.ContinueOnError)
	figures := fs.String("figures", "docs/benchmarks.json", "the measured figures (make bench writes them)")
	t := Target{}
	fs.Float64Var(&t.Waiting, "waiting", 1e6, "people waiting, over all queues")
	fs.Float64Var(&t.Polls, "polls", -1, "ticket polls a second; below 0: every place of every queue polling at its RetryAfter, the pages without a stream")
	fs.Float64Var(&t.Enters, "enters", -1, "enters a second; below 0: waiting over -enter-window")
	fs.Float64Var(&t.Admissions, "admissions", 175, "admissions a second, over all queues")
	fs.Float64Var(&t.Streams, "streams", -1, "open SSE streams; below 0: waiting x -share")
	fs.Float64Var(&t.Share, "share", 0.3, "share of the pages with an event stream open")
	fs.IntVar(&t.Queues, "queues", 1, "queues the targets are spread over, evenly")
	fs.Float64Var(&t.Headroom, "headroom", 0.6, "share of a core, and of a measured rate, to plan on using")
	fs.Float64Var(&t.ReplicaCores, "replica-cores", 2, "cores of a gateway or order-service replica")
	streamGiB := fs.Float64("stream-memory", 1, "GiB a notification-service replica may hold in streams")
	redisGiB := fs.Float64("redis-memory", 4, "GiB of maxmemory a Redis master is given")
	maxPoll := fs.Duration("max-poll", 10*time.Second, "the longest poll interval (queue.MaxRetryAfter in pkg/queue/policy.go)")
	window := fs.Duration("enter-window", time.Minute, "the time in which everyone waiting arrives, for the default -enters")
	if err := fs.Parse(args); err != nil {
		return Target{}, "", err
	}
	if fs.NArg() > 0 {
		return Target{}, "", fmt.Errorf("unexpected arguments %q: every target is a flag", fs.Args())
	}
	t.StreamMemory, t.RedisMemory = *streamGiB*gib, *redisGiB*gib
	t.MaxPoll, t.EnterWindow = maxPoll.Seconds(), window.Seconds()
	return t, *figures, t.check()
}

const gib = 1 << 30

// check refuses a target the arithmetic cannot plan.
func (t Target) check() error {
	switch {
	case t.Waiting <= 0:
		return errors.New("-waiting must be above 0")
	case t.Admissions <= 0:
		return errors.New("-admissions must be above 0 (a queue admits at least 0.01 a second)")
	case t.Queues < 1:
		return errors.New("-queues must be at least 1")
	case t.Headroom <= 0 || t.Headroom > 1:
		return errors.New("-headroom must be above 0 and at most 1")
	case t.Share < 0 || t.Share > 1:
		return errors.New("-share must be within 0 and 1")
	case t.ReplicaCores <= 0 || t.StreamMemory <= 0 || t.RedisMemory <= 0:
		return errors.New("-replica-cores, -stream-memory and -redis-memory must be above 0")
	case t.MaxPoll < 1 || t.EnterWindow <= 0:
		return errors.New("-max-poll must be at least 1s and -enter-window above 0")
	}
	return nil
}
