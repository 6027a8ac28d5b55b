package httpapi

import (
	"io"
	"net/http"
	"unicode/utf8"

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

const (
	maxStock      = 1_000_000_000
	maxPriceCents = 1_000_000_000_00
)

// putProduct: PUT /admin/v1/products/{id} creates or replaces a product.
func (h *handler) putProduct(c *gin.Context) {
	id := c.Param("productId")
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
	var bad []problem.FieldError
	add := func(f, m string) { bad = append(bad, problem.FieldError{Field: f, Message: m}) }
	if !order.ValidProductID(id) {
		add("productId", "must match ^[A-Za-z0-9_.:-]{1,64}$")
	}
	if req.QueueID == nil || !queue.ValidID(*req.QueueID) {
		add("queueId", "required: a valid queue id")
	}
	if req.Name == nil || *req.Name == "" || utf8.RuneCountInString(*req.Name) > 200 {
		add("name", "required: 1 to 200 characters")
	}
	if req.Stock == nil || *req.Stock < 0 || *req.Stock > maxStock {
		add("stock", "required: 0 to 1000000000")
	}
	if req.PriceCents == nil || *req.PriceCents < 0 || *req.PriceCents > maxPriceCents {
		add("priceCents", "required: 0 to 100000000000")
	}
	if len(bad) > 0 {
		problem.Write(c.Writer, c.Request, problem.New(http.StatusBadRequest, problem.TypeValidation, "invalid product").WithErrors(bad))
		return
	}
	p, created, err := h.repo.UpsertProduct(c, order.Product{ID: id, QueueID: *req.QueueID, Name: *req.Name, Stock: *req.Stock, PriceCents: *req.PriceCents})
	if err != nil {
		h.fail(c, err)
		return
	}
	h.catalog.forget(p.QueueID)
	status := http.StatusOK
	if created {
		status = http.StatusCreated
	}
	c.JSON(status, newProductView(p))
}

// listProducts: GET /api/v1/products?queueId=q, public (the waiting page
// shows them), answered from the catalog cache: up to a second old.
func (h *handler) listProducts(c *gin.Context) {
	q := c.Query("queueId")
	if !queue.ValidID(q) {
		problem.Write(c.Writer, c.Request, problem.New(http.StatusBadRequest, problem.TypeValidation, "queueId query parameter: a valid queue id is required"))
		return
	}
	ps, err := h.catalog.Products(c, q)
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
