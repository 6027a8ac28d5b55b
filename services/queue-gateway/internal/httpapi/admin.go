package httpapi

import (
	"encoding/json"
	"io"
	"mime"
	"net/http"
	"strings"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/waitingroom/waitingroom/pkg/auth"
	"github.com/waitingroom/waitingroom/pkg/httpserver"
	"github.com/waitingroom/waitingroom/pkg/problem"
	"github.com/waitingroom/waitingroom/pkg/queue"
	"github.com/waitingroom/waitingroom/services/queue-gateway/internal/app"
)

// queueView is a queue's knobs plus its live figures.
type queueView struct {
	QueueID string `json:"queueId"`
	queue.Config
	Waiting            int64   `json:"waiting"`
	Active             int64   `json:"active"`
	IssuedTotal        int64   `json:"issuedTotal"`
	MeasuredRatePerSec float64 `json:"measuredRatePerSec"`
	// Capacity is the line's effective cap: min(maxQueueSize, maxWaitSeconds x rate).
	Capacity int64 `json:"capacity"`
	// AdmissionHeld says why an open queue admits nobody right now
	// (OUTBOX_BACKLOG: its events wait for the broker); absent when it admits.
	AdmissionHeld string `json:"admissionHeld,omitempty"`
	// Draw is the pre-queue draw of a queue with a start time.
	Draw *drawView `json:"draw,omitempty"`
	// EffectiveRatePerSec is the rate an ADAPTIVE queue admits at now, as
	// its leader set it from the order path's health, and RateReason why;
	// both absent for a FIXED queue (and before a leader's first tick).
	EffectiveRatePerSec float64 `json:"effectiveRatePerSec,omitempty"`
	RateReason          string  `json:"rateReason,omitempty"`
	// Lines are the figures of each line of a queue split into lines.
	Lines []lineView `json:"lines,omitempty"`
	// LineMasters is, on a Redis Cluster, how many masters serve the
	// lines: fewer than min(lines, masters) means lines share a master
	// (slots moved since the queue was split) and the split does less.
	LineMasters int `json:"lineMasters,omitempty"`
	// Masters is the cluster's master count (with LineMasters).
	Masters int `json:"masters,omitempty"`
	// Presence is who is away and what became of the away, for a queue
	// with presence on (awayAfterSeconds); absent when nobody ever was.
	Presence *presenceView `json:"presence,omitempty"`
	// OrderPath is the order path's health as the leader last recorded
	// it; absent without a recent report.
	OrderPath *orderPathView `json:"orderPath,omitempty"`
}

// orderPathView is the order path's health of the last second.
type orderPathView struct {
	P95Ms         int64     `json:"p95Ms"`
	Attempts      int64     `json:"attempts"`
	Created       int64     `json:"created"`
	Unavailable   int64     `json:"unavailable"`
	OutboxBacklog int64     `json:"outboxBacklog"`
	At            time.Time `json:"at"`
}

func newOrderPathView(p queue.OrderPath) *orderPathView {
	if p.At.IsZero() {
		return nil
	}
	return &orderPathView{P95Ms: p.P95.Milliseconds(), Attempts: p.Attempts, Created: p.Created, Unavailable: p.Unavailable,
		OutboxBacklog: p.OutboxBacklog, At: p.At}
}

// presenceView is a queue's away people now and its presence counters.
type presenceView struct {
	// Away: out of the line for being away, their places kept; Skipped:
	// those of them whose place admission passed (in their grace).
	Away    int64 `json:"away"`
	Skipped int64 `json:"skipped"`
	// AwayTotal counts each time someone went away, CameBackTotal each
	// return to a kept place, AbandonedTotal those removed after the grace.
	AwayTotal      int64 `json:"awayTotal"`
	CameBackTotal  int64 `json:"cameBackTotal"`
	AbandonedTotal int64 `json:"abandonedTotal"`
}

// lineView is one line's figures.
type lineView struct {
	Line               int     `json:"line"`
	Waiting            int64   `json:"waiting"`
	Active             int64   `json:"active"`
	IssuedTotal        int64   `json:"issuedTotal"`
	MeasuredRatePerSec float64 `json:"measuredRatePerSec"`
	AdmissionHeld      string  `json:"admissionHeld,omitempty"`
	// Slot and Node are, on a Redis Cluster, the line's keys' slot and
	// the master serving it.
	Slot int    `json:"slot,omitempty"`
	Node string `json:"node,omitempty"`
}

// drawView is a queue's pre-queue draw as anyone may audit it: the seed's
// SHA-256 from the moment the start time is set, the seed once the draw is
// done.
type drawView struct {
	State      string `json:"state"`
	SeedSHA256 string `json:"seedSha256"`
	Seed       string `json:"seed,omitempty"`
	PreQueued  int64  `json:"preQueued"`
	Placed     int64  `json:"placed"`
	StartedAt  string `json:"startedAt,omitempty"`
	DrawnAt    string `json:"drawnAt,omitempty"`
}

func newDrawView(d *queue.Draw) *drawView {
	if d == nil {
		return nil
	}
	v := &drawView{State: string(d.State), SeedSHA256: d.SeedSHA256, Seed: d.Seed, PreQueued: d.PreQueued, Placed: d.Placed}
	if !d.StartedAt.IsZero() {
		v.StartedAt = d.StartedAt.UTC().Format(time.RFC3339Nano)
	}
	if !d.DrawnAt.IsZero() {
		v.DrawnAt = d.DrawnAt.UTC().Format(time.RFC3339Nano)
	}
	return v
}

func newQueueView(q string, cfg queue.Config, st queue.Stats) queueView {
	var lines []lineView
	for _, l := range st.Lines {
		lines = append(lines, lineView{Line: l.Line, Waiting: l.Waiting, Active: l.Active, IssuedTotal: l.IssuedTotal,
			MeasuredRatePerSec: round2(l.MeasuredRate), AdmissionHeld: l.Held, Slot: l.Slot, Node: l.Node})
	}
	masters := 0
	if len(st.Lines) > 0 {
		masters = st.Lines[0].Masters
	}
	return queueView{
		Lines:              lines,
		LineMasters:        st.LineMasters,
		Masters:            masters,
		QueueID:            q,
		Config:             cfg,
		Waiting:            st.Waiting,
		Active:             st.Active,
		IssuedTotal:        st.IssuedTotal,
		MeasuredRatePerSec: round2(st.MeasuredRate),
		Capacity:           cfg.Capacity(),
		AdmissionHeld:      st.Held,
		Draw:               newDrawView(st.Draw),

		EffectiveRatePerSec: round2(st.EffectiveRate),
		RateReason:          st.RateReason,
		Presence:            newPresenceView(st.Presence),
		OrderPath:           newOrderPathView(st.OrderPath),
	}
}

func newPresenceView(p queue.Presence) *presenceView {
	if p == (queue.Presence{}) {
		return nil
	}
	return &presenceView{Away: p.Away, Skipped: p.Skipped, AwayTotal: p.AwayTotal, CameBackTotal: p.CameBackTotal,
		AbandonedTotal: p.AbandonedTotal}
}

func (h *handler) putQueue(c *gin.Context) {
	q := c.Param("queueId")
	if !queue.ValidID(q) {
		h.fail(c, app.ErrInvalidQueueID)
		return
	}
	body, ok := h.readJSON(c)
	if !ok {
		return
	}
	by := operator(c)
	if json.Valid(body) {
		by.Asked = string(body)
	}
	patch, errs := queue.DecodePatch(body)
	if len(errs) > 0 {
		h.svc.RefusedChange(c, q, by, problem.TypeValidation)
		h.fail(c, &app.InvalidConfigError{Fields: errs})
		return
	}
	pre, ok := precondition(c)
	if !ok {
		return
	}
	_, created, err := h.svc.ConfigureIf(c, q, patch, pre, by)
	if err != nil {
		// A change the queue refused (400, 409, 412) goes into its audit
		// trail under the problem type it is answered with; an outage
		// decided nothing.
		if p := problems.Problem(c, h.log, err); p.Status == http.StatusBadRequest || p.Status == http.StatusConflict ||
			p.Status == http.StatusPreconditionFailed {
			h.svc.RefusedChange(c, q, by, p.Type)
		}
		h.fail(c, err)
		return
	}
	cfg, st, err := h.svc.Queue(c, q)
	if err != nil {
		h.fail(c, err)
		return
	}
	c.Header("ETag", cfg.ETag())
	h.log.Info("queue configured", "queue", q, "created", created, "config", cfg)
	status := http.StatusOK
	if created {
		status = http.StatusCreated
		c.Header("Location", c.Request.URL.Path)
	}
	c.Header("Cache-Control", "no-store")
	c.JSON(status, newQueueView(q, cfg, st))
}

func (h *handler) getQueue(c *gin.Context) {
	q := c.Param("queueId")
	cfg, st, err := h.svc.Queue(c, q)
	if err != nil {
		h.fail(c, err)
		return
	}
	c.Header("Cache-Control", "no-store")
	c.Header("ETag", cfg.ETag())
	c.JSON(http.StatusOK, newQueueView(q, cfg, st))
}

// precondition reads If-Match (a list of strong ETags, or *) and
// If-None-Match (only * is meaningful for a write); a weak tag or another
// If-None-Match is 400.
func precondition(c *gin.Context) (app.Precondition, bool) {
	var p app.Precondition
	if v := strings.TrimSpace(c.GetHeader("If-Match")); v != "" {
		for _, tag := range strings.Split(v, ",") {
			tag = strings.TrimSpace(tag)
			if tag != "*" && (len(tag) < 2 || tag[0] != '"' || tag[len(tag)-1] != '"') {
				problem.Write(c.Writer, c.Request, problem.New(http.StatusBadRequest, problem.TypeBadRequest,
					`If-Match takes the strong ETag a GET answered (in quotes), or *`))
				c.Abort()
				return p, false
			}
			p.IfMatch = append(p.IfMatch, tag)
		}
	}
	if v := strings.TrimSpace(c.GetHeader("If-None-Match")); v != "" {
		if v != "*" {
			problem.Write(c.Writer, c.Request, problem.New(http.StatusBadRequest, problem.TypeBadRequest,
				"a write takes only If-None-Match: * (create, never change)"))
			c.Abort()
			return p, false
		}
		p.IfNoneMatch = true
	}
	return p, true
}

func (h *handler) deleteQueue(c *gin.Context) {
	q := c.Param("queueId")
	n, err := h.svc.Close(c, q, operator(c))
	if err != nil {
		h.fail(c, err)
		return
	}
	h.log.Info("queue closed", "queue", q, "dropped", n)
	c.Status(http.StatusNoContent)
}

func (h *handler) listQueues(c *gin.Context) {
	ids, err := h.svc.Queues(c)
	if err != nil {
		h.fail(c, err)
		return
	}
	c.Header("Cache-Control", "no-store")
	c.JSON(http.StatusOK, gin.H{"queues": ids})
}

// readJSON reads a JSON request body within the size limit. It writes the
// problem and returns false when the body cannot be used.
func (h *handler) readJSON(c *gin.Context) ([]byte, bool) {
	if ct := c.GetHeader("Content-Type"); ct != "" {
		mt, _, err := mime.ParseMediaType(ct)
		if err != nil || (mt != "application/json" && mt != "application/merge-patch+json") {
			problem.Write(c.Writer, c.Request, problem.New(http.StatusUnsupportedMediaType, problem.TypeUnsupportedMedia,
				"send the body as application/json"))
			c.Abort()
			return nil, false
		}
	}
	body, err := io.ReadAll(c.Request.Body)
	if err != nil {
		if httpserver.IsBodyTooLarge(err) {
			problem.Write(c.Writer, c.Request, httpserver.BodyTooLarge())
		} else {
			problem.Write(c.Writer, c.Request, problem.New(http.StatusBadRequest, problem.TypeBadRequest, "could not read the request body"))
		}
		c.Abort()
		return nil, false
	}
	return body, true
}

// operator is who makes an admin change, for its QueueChanged: the token's
// subject and the client's address as the trusted proxies pass it on.
func operator(c *gin.Context) queue.Change {
	p, _ := auth.FromContext(c)
	return queue.Change{Actor: p.UserID, Address: c.ClientIP()}
}
