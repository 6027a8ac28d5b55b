//go:build !linux

package httpapi

// epoll: none without Linux, so a goroutine reads each connection.
type epoll struct{}

func (w *watcher) epollAdd(*conn) bool { return false }

func (w *watcher) epollRemove(*conn) {}

func (e *epoll) close() {}

// writeNow writes what the socket takes without waiting: without a write
// that does not wait, nothing, and the write is finished by a goroutine
// of its own.
func (c *conn) writeNow([]byte) (int, error) { return 0, nil }
