package service

import (
	"context"

	"github.com/waitingroom/waitingroom/pkg/httpserver"
)

// Wired is what every service's wire.New returns: its components in a
// Group and its bound listeners. API is nil for a service without an API
// port (the dispatcher).
type Wired struct {
	Group    *Group
	API, Ops *httpserver.Server
}

// Addr is the bound API listener's address.
func (w *Wired) Addr() string { return w.API.Addr() }

// OpsAddr is the bound ops listener's address.
func (w *Wired) OpsAddr() string { return w.Ops.Addr() }

// Run runs the service until ctx ends or a component fails.
func (w *Wired) Run(ctx context.Context) error { return w.Group.Run(ctx) }
