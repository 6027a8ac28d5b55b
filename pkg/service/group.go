package service

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
)

// Group runs a service's components (HTTP servers, consumers, loops,
// relays) as one and owns their goroutines. Run returns when the context
// ends or any component stops, after stopping all of them in one order:
//
//  1. drain: the OnDrain hooks, in the order added (readiness fails, streams
//     end), while every component still runs;
//  2. stop: the components' context is cancelled and Run waits for every
//     one of them to return (servers finish in-flight requests, loops their
//     round, the dispatcher releases its leases);
//  3. close: the resources added with Defer, in reverse order (connections
//     go after everything that used them).
//
// Every error is returned, joined: a component's, a closer's; the context's
// own end is not one.
type Group struct {
	log     *slog.Logger
	parts   []part
	drain   []func()
	closers []closer
	closed  bool
}

type part struct {
	name string
	run  func(context.Context) error
	// task: may finish early; only an error stops the group.
	task bool
}

type closer struct {
	name  string
	close func() error
}

// NewGroup returns an empty group that logs to log.
func NewGroup(log *slog.Logger) *Group { return &Group{log: log} }

// Go adds a component that runs until the group stops. Returning before
// that, with an error or without, stops the group.
func (g *Group) Go(name string, run func(ctx context.Context) error) {
	g.parts = append(g.parts, part{name: name, run: run})
}

// Task adds a component that may finish on its own (a start-up step retried
// until it succeeds). Only its error stops the group.
func (g *Group) Task(name string, run func(ctx context.Context) error) {
	g.parts = append(g.parts, part{name: name, run: run, task: true})
}

// Listener is a bound server (httpserver.Server): it serves until its
// context ends, and Close releases a listener it never served.
type Listener interface {
	Serve(ctx context.Context) error
	Close() error
}

// Listen adds a bound listener as a component, closed with the group's
// resources too, so a start that fails after binding it frees the port.
func (g *Group) Listen(name string, l Listener) {
	g.Defer(name, l.Close)
	g.Go(name, l.Serve)
}

// OnDrain adds what to do first when the group stops, while every
// component still runs: stop taking new work.
func (g *Group) OnDrain(f func()) { g.drain = append(g.drain, f) }

// OnDrainFirst adds a drain hook that runs before every other one, however
// late it is added: readiness must fail before streams are dropped.
func (g *Group) OnDrainFirst(f func()) { g.drain = append([]func(){f}, g.drain...) }

// Defer adds a resource to close once every component has returned.
// Resources close in reverse order of adding.
func (g *Group) Defer(name string, close func() error) {
	g.closers = append(g.closers, closer{name: name, close: close})
}

// Close closes the resources added with Defer, in reverse order, once; it
// is what a constructor calls when it fails half way. Run calls it itself.
func (g *Group) Close() error {
	if g.closed {
		return nil
	}
	g.closed = true
	var errs []error
	for i := len(g.closers) - 1; i >= 0; i-- {
		if err := g.closers[i].close(); err != nil {
			errs = append(errs, fmt.Errorf("close %s: %w", g.closers[i].name, err))
		}
	}
	return errors.Join(errs...)
}

// Run runs every component until ctx ends or one of them stops, then
// drains, stops and closes as the type says, and returns every error.
func (g *Group) Run(ctx context.Context) error {
	work, stop := context.WithCancel(context.WithoutCancel(ctx))
	defer stop()

	type result struct {
		part part
		err  error
	}
	results := make(chan result, len(g.parts))
	var wg sync.WaitGroup
	for _, p := range g.parts {
		wg.Go(func() { results <- result{p, p.run(work)} })
	}

	var errs []error
	record := func(r result) {
		if r.err != nil && !(work.Err() != nil && errors.Is(r.err, context.Canceled)) {
			errs = append(errs, fmt.Errorf("%s: %w", r.part.name, r.err))
		}
	}
	running := len(g.parts)
wait:
	for running > 0 {
		select {
		case <-ctx.Done():
			g.log.Info("stopping: the service was asked to")
			break wait
		case r := <-results:
			running--
			record(r)
			if r.part.task && r.err == nil {
				continue
			}
			if r.err != nil {
				g.log.Error("component failed; stopping the service", "component", r.part.name, "err", r.err)
			} else {
				g.log.Error("component stopped on its own; stopping the service", "component", r.part.name)
				errs = append(errs, fmt.Errorf("%s: stopped on its own", r.part.name))
			}
			break wait
		}
	}
	for _, f := range g.drain {
		f()
	}
	stop()
	wg.Wait()
	close(results)
	for r := range results {
		record(r)
	}
	if err := g.Close(); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}
