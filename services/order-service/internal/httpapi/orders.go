package httpapi

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/waitingroom/waitingroom/pkg/auth"
	"github.com/waitingroom/waitingroom/pkg/httpserver"
	"github.com/waitingroom/waitingroom/pkg/problem"
	"github.com/waitingroom/waitingroom/services/order-service/internal/order"
)

type orderRequest struct {
	QueueID   string `json:"queueId"`
	ProductID string `json:"productId"`
	Quantity  int    `json:"quantity"`
}

type orderView struct {
	OrderID   string `json:"orderId"`
	Status    string `json:"status"`
	QueueID   string `json:"queueId"`
	ProductID string `json:"productId"`
	Quantity  int    `json:"quantity"`
	CreatedAt string `json:"createdAt"`
}

func newOrderView(o order.Order) orderView {
	return orderView{OrderID: o.ID, Status: o.Status, QueueID: o.QueueID, ProductID: o.ProductID,
		Quantity: o.Quantity, CreatedAt: o.CreatedAt.UTC().Format(time.RFC3339Nano)}
}

// placeOrder: POST /api/v1/orders. The order service's Screen comes first:
// a request whose entry token fails the cheap check is answered from Redis
// alone, charged to its user, and never stores its Idempotency-Key. Past
// it, the first final answer for an Idempotency-Key is stored and replayed
// verbatim for the same user and key.
func (h *handler) placeOrder(c *gin.Context) {
	p, _ := auth.FromContext(c)
	req, bad := h.decodeOrder(c)
	if bad != nil {
		h.m.order("invalid")
		problem.Write(c.Writer, c.Request, bad)
		return
	}
	key := c.GetHeader("Idempotency-Key")
	if key != "" && !validIdempotencyKey(key) {
		h.m.order("invalid")
		problem.Write(c.Writer, c.Request, problem.New(http.StatusBadRequest, problem.TypeValidation,
			"Idempotency-Key must be 1 to 255 printable ASCII characters"))
		return
	}
	pr := order.PlaceRequest{
		UserID: p.UserID, QueueID: req.QueueID, ProductID: req.ProductID, Quantity: req.Quantity,
		Token: c.GetHeader("X-Entry-Token"),
	}
	if err := h.svc.Screen(c, pr); err != nil {
		if errors.Is(err, order.ErrTokenSpent) && key != "" {
			// Its holder retrying: replay the stored answer, if any.
			res, found, lerr := h.repo.LookupIdempotent(c, p.UserID, key)
			switch {
			case lerr != nil:
				err = lerr
			case found:
				h.replay(c, res)
				return
			}
		}
		h.answer(c, 0, err, nil)
		return
	}
	if key != "" {
		res, fresh, err := h.repo.BeginIdempotent(c, p.UserID, key)
		if err != nil {
			h.fail(c, err)
			return
		}
		if !fresh {
			h.replay(c, res)
			return
		}
	}
	o, err := h.svc.Place(c, pr)
	status, body := h.answer(c, http.StatusCreated, err, func() []byte {
		c.Header("Location", "/api/v1/orders/"+o.ID)
		b, _ := json.Marshal(newOrderView(o))
		return b
	})
	if key != "" {
		h.storeIdempotent(c, p.UserID, key, status, body)
	}
}

// answer writes an order request's answer, the problem for err or, when
// err is nil, created's body with status ok, and returns what it wrote.
func (h *handler) answer(c *gin.Context, ok int, err error, created func() []byte) (int, []byte) {
	status, ctype := ok, "application/json"
	var body []byte
	if err != nil {
		prob := h.problemFor(c, err)
		if prob.RetryAfter > 0 {
			c.Header("Retry-After", problem.RetryAfterSeconds(prob.RetryAfter))
			prob.RetryAfterMs = prob.RetryAfter.Milliseconds()
		}
		prob.Instance = c.Request.URL.Path
		status, ctype = prob.Status, problem.ContentType
		body, _ = json.Marshal(prob)
	} else {
		body = created()
	}
	h.m.orderResult(status, err)
	c.Header("Cache-Control", "no-store")
	c.Data(status, ctype, body)
	return status, body
}

func (h *handler) decodeOrder(c *gin.Context) (orderRequest, *problem.Problem) {
	var req orderRequest
	raw, err := io.ReadAll(c.Request.Body)
	if err != nil {
		if httpserver.IsBodyTooLarge(err) {
			return req, httpserver.BodyTooLarge()
		}
		return req, problem.New(http.StatusBadRequest, problem.TypeBadRequest, "could not read the request body")
	}
	if err := httpserver.DecodeStrict(raw, &req); err != nil {
		return req, problem.New(http.StatusBadRequest, problem.TypeValidation,
			`the body must be {"queueId": "...", "productId": "...", "quantity": n}: `+err.Error())
	}
	if errs := h.svc.Check(order.PlaceRequest{QueueID: req.QueueID, ProductID: req.ProductID, Quantity: req.Quantity}); len(errs) > 0 {
		fe := make([]problem.FieldError, len(errs))
		for i, e := range errs {
			fe[i] = problem.FieldError{Field: e.Field, Message: e.Message}
		}
		return req, problem.New(http.StatusBadRequest, problem.TypeValidation, "the order request has invalid fields").WithErrors(fe)
	}
	return req, nil
}

// final reports whether an answer is the request's outcome (stored for
// replay) or a passing condition the client should retry past (not stored).
func final(status int) bool {
	switch status {
	case http.StatusTooEarly, http.StatusTooManyRequests, http.StatusServiceUnavailable, http.StatusInternalServerError, 499:
		return false
	}
	return true
}

func (h *handler) storeIdempotent(c *gin.Context, user, key string, status int, body []byte) {
	ctx := c.Request.Context()
	var err error
	if final(status) {
		err = h.repo.FinishIdempotent(ctx, user, key, status, body)
	} else {
		err = h.repo.AbandonIdempotent(ctx, user, key)
	}
	if err != nil {
		h.log.Warn("idempotency record", "user", user, "err", err)
	}
}

func (h *handler) replay(c *gin.Context, res order.IdempotentResult) {
	if !res.Done {
		h.fail(c, order.ErrIdempotencyInProgress)
		return
	}
	ctype := "application/json"
	if res.Status >= 400 {
		ctype = problem.ContentType
	}
	h.m.order("replayed")
	c.Header("Idempotent-Replayed", "true")
	c.Header("Cache-Control", "no-store")
	c.Data(res.Status, ctype, res.Body)
}

func validIdempotencyKey(k string) bool {
	if len(k) > 255 {
		return false
	}
	for i := 0; i < len(k); i++ {
		if k[i] < 0x21 || k[i] > 0x7e {
			return false
		}
	}
	return true
}

func (h *handler) getOrder(c *gin.Context) {
	p, _ := auth.FromContext(c)
	o, err := h.repo.Order(c, c.Param("orderId"))
	if err == nil && o.UserID != p.UserID {
		// Someone else's order does not exist, as far as this caller knows.
		err = order.ErrOrderNotFound
	}
	if err != nil {
		h.fail(c, err)
		return
	}
	c.Header("Cache-Control", "no-store")
	c.JSON(http.StatusOK, newOrderView(o))
}
