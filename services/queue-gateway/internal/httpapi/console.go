package httpapi

import (
	"errors"
	"net/http"

	"github.com/gin-gonic/gin"

	"github.com/waitingroom/waitingroom/pkg/queue"
)

// MaxOverview is how many queues the overview shows (by id): the console's
// live table polls it every two seconds.
const MaxOverview = 500

// overviewEntry is one queue of the overview: its admin view and the ETag
// a change of it sends back in If-Match.
type overviewEntry struct {
	queueView
	ETag string `json:"etag"`
}

// overview serves GET /admin/v1/overview: every queue's knobs and live
// figures in one answer (the first MaxOverview by id; `truncated` says when
// there are more), for the console's table. A queue deleted while it is
// read is left out.
func (h *handler) overview(c *gin.Context) {
	ids, err := h.svc.Queues(c)
	if err != nil {
		h.fail(c, err)
		return
	}
	truncated := len(ids) > MaxOverview
	if truncated {
		ids = ids[:MaxOverview]
	}
	out := make([]overviewEntry, 0, len(ids))
	for _, q := range ids {
		cfg, st, err := h.svc.Queue(c, q)
		if errors.Is(err, queue.ErrNotFound) {
			continue
		}
		if err != nil {
			h.fail(c, err)
			return
		}
		out = append(out, overviewEntry{queueView: newQueueView(q, cfg, st), ETag: cfg.ETag()})
	}
	c.Header("Cache-Control", "no-store")
	c.JSON(http.StatusOK, gin.H{"queues": out, "truncated": truncated})
}
