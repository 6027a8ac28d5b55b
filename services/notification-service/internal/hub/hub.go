// Package hub keeps the open event streams of this replica, indexed by queue
// and user, and offers each stream its messages without ever blocking on a
// slow one (Offer): the stream service drops a stream whose buffer is full,
// and the others go on.
package hub

import (
	"errors"
	"sync"
	"time"

	"github.com/waitingroom/waitingroom/pkg/clientkey"
)

// Open's refusals. The caps count this replica's streams only: a client
// spread over n replicas may hold n times as many.
var (
	ErrIPCap   = errors.New("hub: too many open streams from this client address")
	ErrUserCap = errors.New("hub: too many open streams for this user")
	// ErrShut: the hub was shut (the service is stopping); the client
	// reconnects to another replica.
	ErrShut = errors.New("hub: shut, the service is stopping")
)

// Message is one Server-Sent Event.
type Message struct {
	Event string // event name: "admitted", "position"
	ID    string // SSE id, set on admissions so Last-Event-ID can resume
	Data  []byte // JSON
	// At is when the fact happened (the event's time), for delivery lag.
	At time.Time
}

// Stream is one open connection of one user to one queue: a bounded
// mailbox of messages, emptied by the Sink the HTTP port attaches, which
// writes them out. No goroutine waits on a stream: the sink is told when
// messages wait (Ready) and when the hub drops the stream (Closed).
type Stream struct {
	Queue, User, IP string
	// client is what the per-address cap counts IP under (clientkey.Of).
	client string
	limit  int

	mu     sync.Mutex
	queue  []Message // waiting to be taken, at most limit; nil when empty
	sink   Sink
	closed bool
	// admitted remembers the token ids already announced on this stream, so
	// the event and the position tick's safety net never announce one twice.
	admitted map[string]bool
}

// Sink takes a stream's messages out (the HTTP port's connection). Its
// methods are called from whoever offers or closes, and must not block.
type Sink interface {
	// Ready: messages wait on the stream (Take them).
	Ready()
	// Closed: the stream is closed (slow reader, shutdown, Close); its
	// messages will not be taken.
	Closed()
}

// MarkAdmitted records that tokenID was announced; false if it already was.
func (s *Stream) MarkAdmitted(tokenID string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.admitted[tokenID] {
		return false
	}
	if s.admitted == nil {
		s.admitted = map[string]bool{}
	}
	s.admitted[tokenID] = true
	return true
}

// Attach hands the stream to sink: Ready at once if messages already wait,
// Closed at once if the stream was closed before.
func (s *Stream) Attach(sink Sink) {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		sink.Closed()
		return
	}
	s.sink = sink
	waiting := len(s.queue) > 0
	s.mu.Unlock()
	if waiting {
		sink.Ready()
	}
}

// Take removes and returns the messages waiting, oldest first.
func (s *Stream) Take() []Message {
	s.mu.Lock()
	defer s.mu.Unlock()
	q := s.queue
	s.queue = nil
	return q
}

// Closed reports whether the stream was closed.
func (s *Stream) Closed() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.closed
}

func (s *Stream) close() {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return
	}
	s.closed, s.queue = true, nil
	sink := s.sink
	s.mu.Unlock()
	if sink != nil {
		sink.Closed()
	}
}

type key struct{ queue, user string }

// Hub is safe for concurrent use.
type Hub struct {
	buffer     int
	maxPerIP   int
	maxPerUser int
	ipv6Bits   int

	mu      sync.RWMutex
	streams map[key]map[*Stream]struct{}
	perIP   map[string]int // by clientkey.Of
	perUser map[string]int // over all queues
	total   int
	shut    bool
}

// Option tunes a Hub.
type Option func(*Hub)

// MaxPerUser caps the streams one user holds open, over all queues (0: no
// cap). A person with a few tabs is fine; one login opening hundreds of
// streams from as many addresses is not.
func MaxPerUser(n int) Option { return func(h *Hub) { h.maxPerUser = n } }

// IPv6Prefix is the prefix length the per-address cap counts an IPv6 client
// by (clientkey.Of); the default is clientkey.DefaultIPv6Prefix.
func IPv6Prefix(bits int) Option { return func(h *Hub) { h.ipv6Bits = bits } }

// New returns a hub whose streams buffer up to buffer messages, allowing at
// most maxPerIP streams per client address (0: no cap), an IPv6 client
// counted by its prefix.
func New(buffer, maxPerIP int, opts ...Option) *Hub {
	if buffer < 1 {
		buffer = 16
	}
	h := &Hub{buffer: buffer, maxPerIP: maxPerIP, ipv6Bits: clientkey.DefaultIPv6Prefix,
		streams: map[key]map[*Stream]struct{}{}, perIP: map[string]int{}, perUser: map[string]int{}}
	for _, o := range opts {
		o(h)
	}
	return h
}

// Open registers a stream of user to queue from the client address ip.
// It fails with ErrIPCap or ErrUserCap when either is at its cap.
func (h *Hub) Open(queue, user, ip string) (*Stream, error) {
	client := clientkey.Of(ip, h.ipv6Bits)
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.shut {
		return nil, ErrShut
	}
	if h.maxPerIP > 0 && h.perIP[client] >= h.maxPerIP {
		return nil, ErrIPCap
	}
	if h.maxPerUser > 0 && h.perUser[user] >= h.maxPerUser {
		return nil, ErrUserCap
	}
	s := &Stream{Queue: queue, User: user, IP: ip, client: client, limit: h.buffer}
	k := key{queue, user}
	if h.streams[k] == nil {
		h.streams[k] = map[*Stream]struct{}{}
	}
	h.streams[k][s] = struct{}{}
	h.perIP[client]++
	h.perUser[user]++
	h.total++
	return s, nil
}

// Close unregisters a stream and tells its sink; closing it again changes
// nothing.
func (h *Hub) Close(s *Stream) {
	if h.unregister(s) {
		s.close()
	}
}

// unregister takes s out of the indexes; false if it was not in them.
func (h *Hub) unregister(s *Stream) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	k := key{s.Queue, s.User}
	if _, ok := h.streams[k][s]; !ok {
		return false
	}
	delete(h.streams[k], s)
	if len(h.streams[k]) == 0 {
		delete(h.streams, k)
	}
	if h.perIP[s.client]--; h.perIP[s.client] <= 0 {
		delete(h.perIP, s.client)
	}
	if h.perUser[s.User]--; h.perUser[s.User] <= 0 {
		delete(h.perUser, s.User)
	}
	h.total--
	return true
}

// Len is the number of open streams.
func (h *Hub) Len() int {
	h.mu.RLock()
	defer h.mu.RUnlock()
	return h.total
}

// Offer puts m on s without blocking and tells its sink; false when the
// buffer is full. A closed stream takes nothing and is not full.
func Offer(s *Stream, m Message) bool {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return true
	}
	if len(s.queue) >= s.limit {
		s.mu.Unlock()
		return false
	}
	s.queue = append(s.queue, m)
	sink := s.sink
	s.mu.Unlock()
	if sink != nil {
		sink.Ready()
	}
	return true
}

// Users lists, per queue, the users with at least one open stream.
func (h *Hub) Users() map[string][]string {
	h.mu.RLock()
	defer h.mu.RUnlock()
	out := map[string][]string{}
	for k := range h.streams {
		out[k.queue] = append(out[k.queue], k.user)
	}
	return out
}

// Streams returns the open streams of (queue, user).
func (h *Hub) Streams(queue, user string) []*Stream {
	h.mu.RLock()
	defer h.mu.RUnlock()
	out := make([]*Stream, 0, len(h.streams[key{queue, user}]))
	for s := range h.streams[key{queue, user}] {
		out = append(out, s)
	}
	return out
}

// Shut drops every stream and refuses new ones (ErrShut): the service is
// stopping, and its streams never end on their own. EventSource reconnects
// to another replica.
func (h *Hub) Shut() {
	h.mu.Lock()
	h.shut = true
	h.mu.Unlock()
	h.CloseAll()
}

// CloseAll drops every stream.
func (h *Hub) CloseAll() {
	h.mu.RLock()
	var all []*Stream
	for _, set := range h.streams {
		for s := range set {
			all = append(all, s)
		}
	}
	h.mu.RUnlock()
	for _, s := range all {
		h.Close(s)
	}
}
