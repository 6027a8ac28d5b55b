// Package httpserver runs a service's HTTP listener with graceful shutdown and
// builds the gin engine every service shares (problem+json for unknown routes,
// panics and oversized bodies, request metrics, /healthz and /readyz) and the
// ops listener apart from it (/metrics, /healthz, /readyz, pprof).
package httpserver

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/waitingroom/waitingroom/pkg/config"
)

// Server is an HTTP server whose listener is bound at construction.
type Server struct {
	srv             *http.Server
	ln              net.Listener
	name            string
	log             *slog.Logger
	shutdownTimeout time.Duration
}

// Options configure a Server.
type Options struct {
	// Name tells the listener apart in log lines ("api", "ops").
	Name string
	// Timeouts bound each connection and the graceful shutdown (see
	// config.HTTP); a zero field is no limit, as in net/http.
	Timeouts config.HTTP
}

// maxHeaderTimeout is the longest a client may take to send its headers,
// whatever the read timeout: a client that has not finished them by then
// is not going to.
const maxHeaderTimeout = 5 * time.Second

// New binds addr and returns a server for h. Binding here, not in Serve, makes a
// busy port a start-up error and lets tests use ":0" and read Addr.
func New(addr string, h http.Handler, log *slog.Logger, o Options) (*Server, error) {
	if h == nil || log == nil {
		return nil, errors.New("httpserver: handler and logger are required")
	}
	if o.Name == "" {
		o.Name = "api"
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("httpserver: %s: listen %s: %w", o.Name, addr, err)
	}
	tl, ok := ln.(*net.TCPListener)
	if !ok {
		_ = ln.Close()
		return nil, fmt.Errorf("httpserver: %s: listen %s: not a TCP listener", o.Name, addr)
	}
	header := maxHeaderTimeout
	if t := o.Timeouts.ReadTimeout; t > 0 && t < header {
		header = t
	}
	return &Server{
		srv: &http.Server{
			Handler:           limitHead(h),
			ReadHeaderTimeout: header,
			ReadTimeout:       o.Timeouts.ReadTimeout,
			WriteTimeout:      o.Timeouts.WriteTimeout,
			IdleTimeout:       o.Timeouts.IdleTimeout,
			// net/http reads MaxHeaderBytes plus its slack before it
			// refuses a head: together they are the documented limit.
			MaxHeaderBytes: MaxHeaderBytes - netHTTPReadSlack,
			ErrorLog:       slog.NewLogLogger(log.With("listener", o.Name).Handler(), slog.LevelWarn),
		},
		ln:              headerLimitListener{tl},
		name:            o.Name,
		log:             log.With("listener", o.Name),
		shutdownTimeout: o.Timeouts.ShutdownTimeout,
	}, nil
}

// Addr is the bound address.
func (s *Server) Addr() string { return s.ln.Addr().String() }

// Close releases the listener of a server that is not serving: a start-up
// that failed after binding it. After Serve it does nothing.
func (s *Server) Close() error {
	if err := s.ln.Close(); err != nil && !errors.Is(err, net.ErrClosed) {
		return err
	}
	return nil
}

// Serve serves until ctx is done, then stops accepting, lets in-flight requests
// finish within the shutdown timeout, and returns.
func (s *Server) Serve(ctx context.Context) error {
	errc := make(chan error, 1)
	go func() { errc <- s.srv.Serve(s.ln) }()
	s.log.Info("http server listening", "addr", s.Addr())

	select {
	case err := <-errc:
		return fmt.Errorf("httpserver: %s: %w", s.name, err)
	case <-ctx.Done():
	}
	s.log.Info("http server shutting down", "timeout", s.shutdownTimeout.String())
	sctx, cancel := context.WithTimeout(context.Background(), s.shutdownTimeout)
	defer cancel()
	if err := s.srv.Shutdown(sctx); err != nil {
		_ = s.srv.Close()
		return fmt.Errorf("httpserver: %s: shutdown: %w", s.name, err)
	}
	if err := <-errc; err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("httpserver: %s: %w", s.name, err)
	}
	return nil
}
