package httpapi

import (
	"net/http"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/waitingroom/waitingroom/pkg/auth"
	"github.com/waitingroom/waitingroom/pkg/challenge"
	"github.com/waitingroom/waitingroom/pkg/clientkey"
	"github.com/waitingroom/waitingroom/pkg/problem"
	"github.com/waitingroom/waitingroom/pkg/queue"
)

// challengeHeader carries a solved enter challenge: "<challenge>:<nonce>".
const challengeHeader = "X-Enter-Challenge"

// challengeView is an issued challenge, as the page's worker solves it.
type challengeView struct {
	Challenge      string `json:"challenge"`
	Algorithm      string `json:"algorithm"`
	DifficultyBits int    `json:"difficultyBits"`
	ExpiresAt      string `json:"expiresAt"`
	ExpiresInMs    int64  `json:"expiresInMs"`
}

// challenge: POST /api/v1/queues/{queueId}/challenge. A fresh challenge for
// the caller at the queue's current difficulty; stateless until a solution
// is used at enter.
func (h *handler) challenge(c *gin.Context) {
	p, _ := auth.FromContext(c)
	ch, err := h.svc.Challenge(c, c.Param("queueId"), p.UserID)
	if err != nil {
		h.fail(c, err)
		return
	}
	c.Header("Cache-Control", "no-store")
	c.JSON(http.StatusCreated, challengeView{
		Challenge:      ch.Value,
		Algorithm:      challenge.Algorithm,
		DifficultyBits: ch.Bits,
		ExpiresAt:      ch.ExpiresAt.UTC().Format(time.RFC3339Nano),
		ExpiresInMs:    time.Until(ch.ExpiresAt).Milliseconds(),
	})
}

// powBits is the difficulty a public view shows: only when it applies.
func powBits(cfg queue.Config) int64 {
	if cfg.EnterChallenge != queue.ChallengeProofOfWork {
		return 0
	}
	return cfg.PowDifficultyBits
}

// limitChallenge applies the per-IP challenge limit before the token is
// checked, as limitEnter does for enters.
func (h *handler) limitChallenge(c *gin.Context) {
	ok, retry, err := h.svc.AllowChallenge(c, clientkey.Of(c.ClientIP(), h.v6bits))
	if err != nil {
		h.fail(c, err)
		return
	}
	if !ok {
		problem.Write(c.Writer, c.Request, problem.New(http.StatusTooManyRequests, problem.TypeRateLimited,
			"too many challenge requests from this address").WithRetryAfter(max(retry, time.Second)))
		c.Abort()
	}
}
