// Package httpserver runs a service's HTTP listener with graceful shutdown and
// builds the gin engine every service shares: problem+json for unknown routes,
// panics and oversized bodies, request metrics, and /healthz /readyz /metrics.
package httpserver

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"
)

// Server is an HTTP server whose listener is bound at construction.
type Server struct {
	srv             *http.Server
	ln              net.Listener
	log             *slog.Logger
	shutdownTimeout time.Duration
}

// New binds addr and returns a server for h. Binding here, not in Serve, makes a
// busy port a start-up error and lets tests use ":0" and read Addr.
func New(addr string, h http.Handler, log *slog.Logger, shutdownTimeout time.Duration) (*Server, error) {
	if h == nil || log == nil {
		return nil, errors.New("httpserver: handler and logger are required")
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("httpserver: listen %s: %w", addr, err)
	}
	return &Server{
		srv: &http.Server{
			Handler:           h,
			ReadHeaderTimeout: 5 * time.Second,
			IdleTimeout:       120 * time.Second,
			MaxHeaderBytes:    16 << 10,
			ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
		},
		ln:              ln,
		log:             log,
		shutdownTimeout: shutdownTimeout,
	}, nil
}

// Addr is the bound address.
func (s *Server) Addr() string { return s.ln.Addr().String() }

// Serve serves until ctx is done, then stops accepting, lets in-flight requests
// finish within the shutdown timeout, and returns.
func (s *Server) Serve(ctx context.Context) error {
	errc := make(chan error, 1)
	go func() { errc <- s.srv.Serve(s.ln) }()
	s.log.Info("http server listening", "addr", s.Addr())

	select {
	case err := <-errc:
		return fmt.Errorf("httpserver: %w", err)
	case <-ctx.Done():
	}
	s.log.Info("http server shutting down", "timeout", s.shutdownTimeout.String())
	sctx, cancel := context.WithTimeout(context.Background(), s.shutdownTimeout)
	defer cancel()
	if err := s.srv.Shutdown(sctx); err != nil {
		_ = s.srv.Close()
		return fmt.Errorf("httpserver: shutdown: %w", err)
	}
	if err := <-errc; err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("httpserver: %w", err)
	}
	return nil
}
