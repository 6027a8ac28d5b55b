package httpapi

import (
	"io"
	"net/http"

	"github.com/gin-gonic/gin"

	"github.com/waitingroom/waitingroom/pkg/httpserver"
	"github.com/waitingroom/waitingroom/pkg/problem"
	"github.com/waitingroom/waitingroom/pkg/queue"
	"github.com/waitingroom/waitingroom/services/order-service/internal/order"
)

type productRequest struct {
	QueueID    *string `json:"queueId"`
	Name       *string `json:"name"`
	Stock      *int    `json:"stock"`
	PriceCents *int64  `json:"priceCents"`
}

type productView struct {
	ProductID  string `json:"productId"`
	QueueID    string `json:"queueId"`
	Name       string `json:"name"`
	Stock      int    `json:"stock"`
	PriceCents int64  `json:"priceCents"`
}

func newProductView(p order.Product) productView {
	return productView{ProductID: p.ID, QueueID: p.QueueID, Name: p.Name, Stock: p.Stock, PriceCents: p.PriceCents}
}

// putProduct: PUT /admin/v1/products/{id} creates or replaces a product.
// The body must carry all four fields; their rules are the order
// service's (order.CheckProduct).
func (h *handler) putProduct(c *gin.Context) {
	raw, err := io.ReadAll(c.Request.Body)
	if err != nil {
		if httpserver.IsBodyTooLarge(err) {
			problem.Write(c.Writer, c.Request, httpserver.BodyTooLarge())
		} else {
			problem.Write(c.Writer, c.Request, problem.New(http.StatusBadRequest, problem.TypeBadRequest, "could not read the body"))
		}
		return
	}
	var req productRequest
	if err := httpserver.DecodeStrict(raw, &req); err != nil {
		problem.Write(c.Writer, c.Request, problem.New(http.StatusBadRequest, problem.TypeValidation,
			`the body must be {"queueId","name","stock","priceCents"}`))
		return
	}
	var missing []problem.FieldError
	for _, f := range []struct {
		name  string
		given bool
	}{{"queueId", req.QueueID != nil}, {"name", req.Name != nil}, {"stock", req.Stock != nil}, {"priceCents", req.PriceCents != nil}} {
		if !f.given {
			missing = append(missing, problem.FieldError{Field: f.name, Message: "required"})
		}
	}
	if len(missing) > 0 {
		problem.Write(c.Writer, c.Request, problem.New(http.StatusBadRequest, problem.TypeValidation, "invalid product").WithErrors(missing))
		return
	}
	p, created, err := h.svc.PutProduct(c, order.Product{ID: c.Param("productId"), QueueID: *req.QueueID, Name: *req.Name,
		Stock: *req.Stock, PriceCents: *req.PriceCents})
	if err != nil {
		h.fail(c, err)
		return
	}
	status := http.StatusOK
	if created {
		status = http.StatusCreated
	}
	c.JSON(status, newProductView(p))
}

// listProducts: GET /api/v1/products?queueId=q, public (the waiting page
// shows them), answered from the order service's cache: up to a second old.
func (h *handler) listProducts(c *gin.Context) {
	q := c.Query("queueId")
	if !queue.ValidID(q) {
		problem.Write(c.Writer, c.Request, problem.New(http.StatusBadRequest, problem.TypeValidation, "queueId query parameter: a valid queue id is required"))
		return
	}
	ps, err := h.svc.Products(c, q)
	if err != nil {
		h.fail(c, err)
		return
	}
	out := make([]productView, len(ps))
	for i, p := range ps {
		out[i] = newProductView(p)
	}
	c.Header("Cache-Control", "public, max-age=1")
	c.JSON(http.StatusOK, gin.H{"products": out})
}
