package httpapi

import (
	"encoding/json"
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

// placeOrder: POST /api/v1/orders, run by the order service's PlaceOnce:
// a request whose entry token fails the cheap check is answered from Redis
// alone and never stores its Idempotency-Key; past it, the first final
// answer for an Idempotency-Key is stored and replayed verbatim for the
// same user and key.
func (h *handler) placeOrder(c *gin.Context) {
	p, _ := auth.FromContext(c)
	req, bad := h.decodeOrder(c)
	if bad != nil {
		h.svc.Malformed()
		problem.Write(c.Writer, c.Request, bad)
		return
	}
	key := c.GetHeader("Idempotency-Key")
	if key != "" && !validIdempotencyKey(key) {
		h.svc.Malformed()
		problem.Write(c.Writer, c.Request, problem.New(http.StatusBadRequest, problem.TypeValidation,
			"Idempotency-Key must be 1 to 255 printable ASCII characters"))
		return
	}
	pr := order.PlaceRequest{
		UserID: p.UserID, QueueID: req.QueueID, ProductID: req.ProductID, Quantity: req.Quantity,
		Token: c.GetHeader("X-Entry-Token"),
	}
	ans, replayed, err := h.svc.PlaceOnce(c, pr, key, func(o order.Order, err error) order.StoredAnswer { return h.render(c, o, err) })
	switch {
	case err != nil:
		h.fail(c, err)
	case replayed:
		c.Header("Idempotent-Replayed", "true")
		h.write(c, ans)
	default:
		h.write(c, ans)
	}
}

// render is an order request's answer: the created order (201, with its
// Location), or the problem for err (with Retry-After when it has one).
// It sets those headers; write sends the answer.
func (h *handler) render(c *gin.Context, o order.Order, err error) order.StoredAnswer {
	if err != nil {
		prob := h.problemFor(c, err)
		if prob.RetryAfter > 0 {
			c.Header("Retry-After", problem.RetryAfterSeconds(prob.RetryAfter))
			prob.RetryAfterMs = prob.RetryAfter.Milliseconds()
		}
		prob.Instance = c.Request.URL.Path
		body, _ := json.Marshal(prob)
		return order.StoredAnswer{Status: prob.Status, Body: body, Done: true}
	}
	c.Header("Location", "/api/v1/orders/"+o.ID)
	body, _ := json.Marshal(newOrderView(o))
	return order.StoredAnswer{Status: http.StatusCreated, Body: body, Done: true}
}

// write sends an answer, fresh or replayed: a problem from 400 up, JSON
// below.
func (h *handler) write(c *gin.Context, ans order.StoredAnswer) {
	ctype := "application/json"
	if ans.Status >= 400 {
		ctype = problem.ContentType
	}
	c.Header("Cache-Control", "no-store")
	c.Data(ans.Status, ctype, ans.Body)
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
	o, err := h.svc.Order(c, p.UserID, c.Param("orderId"))
	if err != nil {
		h.fail(c, err)
		return
	}
	c.Header("Cache-Control", "no-store")
	c.JSON(http.StatusOK, newOrderView(o))
}
