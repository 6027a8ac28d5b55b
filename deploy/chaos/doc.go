// Package chaos holds fault drills: the real service binaries as processes
// against real (or private) Redis, RabbitMQ and PostgreSQL, with processes
// killed and servers stopped or cut mid-run. Each drill prints a Jepsen-style
// summary line and fails on any loss. CHAOS_FULL=1 runs the long form.
package chaos
