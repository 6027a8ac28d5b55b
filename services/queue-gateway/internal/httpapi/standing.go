package httpapi

import (
	"math"
	"net/http"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/waitingroom/waitingroom/pkg/auth"
	"github.com/waitingroom/waitingroom/pkg/clientkey"
	"github.com/waitingroom/waitingroom/pkg/problem"
	"github.com/waitingroom/waitingroom/pkg/queue"
)

// writeStanding answers with s's view. Every poll ends here, so the view
// writes its own JSON (View.AppendJSON: json.Marshal's bytes, without
// reflection).
func writeStanding(c *gin.Context, s queue.Standing) {
	body, retryAfter := standingBody(s, make([]byte, 0, 512))
	c.Header("Cache-Control", "no-store")
	c.Header("Retry-After", retryAfter)
	c.Data(http.StatusOK, "application/json; charset=utf-8", body)
}

// standingBody appends the view of s (to its holder) to buf, and returns
// it with its Retry-After value: what the engine's answer and the fast
// path's both send.
func standingBody(s queue.Standing, buf []byte) ([]byte, string) {
	v, retry := queue.NewView(s, true)
	return v.AppendJSON(buf), problem.RetryAfterSeconds(retry)
}

func (h *handler) enter(c *gin.Context) {
	p, _ := auth.FromContext(c)
	st, err := h.svc.Enter(c, c.Param("queueId"), p.UserID, c.GetHeader(challengeHeader))
	if err != nil {
		h.fail(c, err)
		return
	}
	writeStanding(c, st)
}

// ticketHeader carries the queue ticket a WAITING answer handed out: a
// poll with it is answered from the admission frontier while the place is
// far from the front.
const ticketHeader = "X-Queue-Ticket"

func (h *handler) position(c *gin.Context) {
	p, _ := auth.FromContext(c)
	st, err := h.svc.Position(c, c.Param("queueId"), p.UserID, c.GetHeader(ticketHeader))
	if err != nil {
		h.fail(c, err)
		return
	}
	writeStanding(c, st)
}

func (h *handler) leave(c *gin.Context) {
	p, _ := auth.FromContext(c)
	if err := h.svc.Leave(c, c.Param("queueId"), p.UserID); err != nil {
		h.fail(c, err)
		return
	}
	c.Status(http.StatusNoContent)
}

// publicQueueView is what anybody may know of a queue.
type publicQueueView struct {
	QueueID string `json:"queueId"`
	State   string `json:"state"`
	Waiting int64  `json:"waiting"`
	// AdmissionRatePerSec is the rate the queue admits at: configured, or
	// for an ADAPTIVE queue the effective one its leader set.
	AdmissionRatePerSec float64 `json:"admissionRatePerSec"`
	MeasuredRatePerSec  float64 `json:"measuredRatePerSec"`
	// EnterChallenge tells a page to fetch and solve a challenge before
	// its first enter, instead of learning it from a 428.
	EnterChallenge    string `json:"enterChallenge"`
	PowDifficultyBits int64  `json:"powDifficultyBits,omitempty"`
	// StartsAt is the sale's start time, when it has one; Draw is its
	// pre-queue draw (the seed's hash before, the seed after), for anyone
	// to audit.
	StartsAt string    `json:"startsAt,omitempty"`
	Draw     *drawView `json:"draw,omitempty"`
}

func (h *handler) publicQueue(c *gin.Context) {
	q := c.Param("queueId")
	cfg, stats, err := h.svc.PublicQueue(c, q)
	if err != nil {
		h.fail(c, err)
		return
	}
	var starts string
	if !cfg.StartsAt.IsZero() {
		starts = cfg.StartsAt.UTC().Format(time.RFC3339Nano)
	}
	// Cheap to cache: a second-old figure is as good for a waiting page.
	c.Header("Cache-Control", "public, max-age=1")
	rate := cfg.AdmissionRatePerSec
	if cfg.AdmissionMode == queue.AdmissionAdaptive && stats.EffectiveRate > 0 {
		rate = round2(stats.EffectiveRate)
	}
	c.JSON(http.StatusOK, publicQueueView{
		StartsAt:            starts,
		Draw:                newDrawView(stats.Draw),
		QueueID:             q,
		State:               string(cfg.State),
		Waiting:             stats.Waiting,
		AdmissionRatePerSec: rate,
		MeasuredRatePerSec:  round2(stats.MeasuredRate),
		EnterChallenge:      string(cfg.EnterChallenge),
		PowDifficultyBits:   powBits(cfg),
	})
}

// limitEnter applies the per-IP enter limit before the token is even checked.
// An IPv6 client counts by its prefix: it may pick a new address of its /64
// for every request.
func (h *handler) limitEnter(c *gin.Context) {
	ok, retry, err := h.svc.AllowEnter(c, c.Param("queueId"), clientkey.Of(c.ClientIP(), h.v6bits))
	if err != nil {
		h.fail(c, err)
		return
	}
	if !ok {
		problem.Write(c.Writer, c.Request, problem.New(http.StatusTooManyRequests, problem.TypeRateLimited,
			"too many enter requests from this address").WithRetryAfter(max(retry, time.Second)))
		c.Abort()
	}
}

func round2(f float64) float64 { return math.Round(f*100) / 100 }
