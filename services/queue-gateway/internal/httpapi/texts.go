package httpapi

import (
	"encoding/json"
	"errors"
	"net/http"
	"slices"
	"strings"

	"github.com/gin-gonic/gin"

	"github.com/waitingroom/waitingroom/pkg/problem"
	"github.com/waitingroom/waitingroom/services/queue-gateway/internal/web"
)

// A queue's own wording of the waiting page: the admin API sets it per
// language, checked against the page's English messages (web.CheckTexts);
// the page loads it over its translation file.

// textsRoutes are the wording's routes, given the page they word.
type textsRoutes struct {
	h    *handler
	page *web.Handler
}

// put replaces q's wording in one language: 200 with the stored set, 400
// validation-failed naming each bad message key.
func (r textsRoutes) put(c *gin.Context) {
	q, lang := c.Param("queueId"), c.Param("lang")
	body, ok := r.h.readJSON(c)
	if !ok {
		return
	}
	msgs, err := r.page.CheckTexts(lang, body)
	var bad *web.TextsError
	if errors.As(err, &bad) {
		by := operator(c)
		by.Wording, by.Asked = lang, string(body)
		r.h.svc.RefusedChange(c, q, by, problem.TypeValidation)
		fields := make([]problem.FieldError, 0, len(bad.Fields))
		for k, m := range bad.Fields {
			fields = append(fields, problem.FieldError{Field: k, Message: m})
		}
		slices.SortFunc(fields, func(a, b problem.FieldError) int { return strings.Compare(a.Field, b.Field) })
		r.h.fail(c, problem.New(http.StatusBadRequest, problem.TypeValidation, "the wording has invalid messages").WithErrors(fields))
		return
	}
	if err != nil {
		r.h.fail(c, err)
		return
	}
	replaced, err := r.h.svc.SetTexts(c, q, lang, msgs, operator(c))
	if err != nil {
		r.h.fail(c, err)
		return
	}
	r.h.log.Info("queue wording set", "queue", q, "lang", lang, "replaced", replaced, "bytes", len(msgs))
	c.Header("Cache-Control", "no-store")
	c.Data(http.StatusOK, "application/json", msgs)
}

// remove drops q's wording in one language: 204, or 404 not-found when it
// had none.
func (r textsRoutes) remove(c *gin.Context) {
	q, lang := c.Param("queueId"), c.Param("lang")
	had, err := r.h.svc.DeleteTexts(c, q, lang, operator(c))
	if err != nil {
		r.h.fail(c, err)
		return
	}
	if !had {
		r.h.fail(c, problem.New(http.StatusNotFound, problem.TypeNotFound, "this queue has no wording of its own in this language"))
		return
	}
	r.h.log.Info("queue wording removed", "queue", q, "lang", lang)
	c.Status(http.StatusNoContent)
}

// list is q's wording in every language: {"texts": {lang: {key: message}}}.
func (r textsRoutes) list(c *gin.Context) {
	all, err := r.h.svc.AllTexts(c, c.Param("queueId"))
	if err != nil {
		r.h.fail(c, err)
		return
	}
	out := make(map[string]json.RawMessage, len(all))
	for lang, msgs := range all {
		out[lang] = msgs
	}
	c.Header("Cache-Control", "no-store")
	c.JSON(http.StatusOK, gin.H{"texts": out})
}

// forPage is what the page loads: q's wording in one language, {} when it has
// none (a queue that does not exist has none either: the page says so
// itself when it enters). Cached briefly, as the gateway's copy is.
func (r textsRoutes) forPage(c *gin.Context) {
	q, lang := c.Param("queueId"), c.Param("lang")
	if !r.page.Speaks(lang) {
		r.h.fail(c, problem.New(http.StatusNotFound, problem.TypeNotFound, "the page speaks no such language"))
		return
	}
	msgs, err := r.h.svc.PageTexts(c, q, lang)
	if err != nil {
		r.h.fail(c, err)
		return
	}
	if msgs == nil {
		msgs = []byte("{}")
	}
	c.Header("Cache-Control", "public, max-age=5")
	c.Data(http.StatusOK, "application/json", msgs)
}
