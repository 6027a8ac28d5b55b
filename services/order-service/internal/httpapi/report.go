package httpapi

import (
	"encoding/csv"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/waitingroom/waitingroom/pkg/httpserver"
	"github.com/waitingroom/waitingroom/pkg/problem"
	"github.com/waitingroom/waitingroom/services/order-service/internal/history"
	"github.com/waitingroom/waitingroom/services/order-service/internal/order"
)

// The sale report: GET /admin/v1/queues/{queueId}/report?from=&to= serves
// a queue's history over a range, every minute of it, with totals and
// peaks, as JSON, or as CSV (one row a minute) for Accept: text/csv or
// format=csv.

var reportProblems = httpserver.NewProblems(
	httpserver.As(func(p *problem.Problem) *problem.Problem { return p }),
	httpserver.Is(history.ErrInvalidRange, problem.New(http.StatusBadRequest, problem.TypeValidation,
		"the queue id, or the range (from before to, at most 31 days), is not valid")),
	httpserver.Is(order.ErrUnavailable, problem.New(http.StatusServiceUnavailable, problem.TypeBackendUnavailable,
		"the history's database is not answering; try again shortly").WithRetryAfter(2*time.Second)).Unavailable("history database unavailable"),
)

// minuteView is one minute of a report (or its totals) as the API shows
// it.
type minuteView struct {
	Minute        time.Time `json:"minute"`
	Arrivals      int64     `json:"arrivals"`
	Admitted      int64     `json:"admitted"`
	OrdersCreated int64     `json:"ordersCreated"`
	OrdersFailed  int64     `json:"ordersFailed"`
	ExpiredUnused int64     `json:"expiredUnused"`
	Left          int64     `json:"left"`
	Abandoned     int64     `json:"abandoned"`
	WaitP50Ms     int64     `json:"waitP50Ms"`
	WaitP95Ms     int64     `json:"waitP95Ms"`
	WaitMaxMs     int64     `json:"waitMaxMs"`
}

func viewOf(m history.Minute) minuteView {
	return minuteView{
		Minute: m.Start, Arrivals: m.Counts.Arrivals, Admitted: m.Counts.Admitted,
		OrdersCreated: m.OrdersCreated, OrdersFailed: m.OrdersFailed, ExpiredUnused: m.Counts.ExpiredUnused,
		Left: m.Counts.Left, Abandoned: m.Counts.Abandoned,
		WaitP50Ms: m.Wait(0.5).Milliseconds(), WaitP95Ms: m.Wait(0.95).Milliseconds(), WaitMaxMs: m.Counts.WaitMax.Milliseconds(),
	}
}

// csvHeader names the CSV's columns: the JSON minute's fields, in order.
var csvHeader = []string{"minute", "arrivals", "admitted", "ordersCreated", "ordersFailed", "expiredUnused", "left", "abandoned",
	"waitP50Ms", "waitP95Ms", "waitMaxMs"}

func (v minuteView) record() []string {
	n := func(i int64) string { return strconv.FormatInt(i, 10) }
	return []string{v.Minute.UTC().Format(time.RFC3339), n(v.Arrivals), n(v.Admitted), n(v.OrdersCreated), n(v.OrdersFailed),
		n(v.ExpiredUnused), n(v.Left), n(v.Abandoned), n(v.WaitP50Ms), n(v.WaitP95Ms), n(v.WaitMaxMs)}
}

type reportRoutes struct {
	history *history.Service
	log     *slog.Logger
}

func (r reportRoutes) report(c *gin.Context) {
	var from, to time.Time
	if err := queryTimes(c, map[string]*time.Time{"from": &from, "to": &to}); err != nil {
		reportProblems.Fail(c, r.log, err)
		return
	}
	format := c.Query("format")
	if format == "" && strings.Contains(c.GetHeader("Accept"), "text/csv") {
		format = "csv"
	}
	if format != "" && format != "csv" && format != "json" {
		reportProblems.Fail(c, r.log, problem.New(http.StatusBadRequest, problem.TypeValidation, "format is csv or json"))
		return
	}
	q := c.Param("queueId")
	rep, err := r.history.ReportOf(c, q, from, to)
	if err != nil {
		reportProblems.Fail(c, r.log, err)
		return
	}
	c.Header("Cache-Control", "no-store")
	if format == "csv" {
		name := q + "-" + rep.From.Format("20060102T1504Z") + "-" + rep.To.Format("20060102T1504Z") + ".csv"
		c.Header("Content-Type", "text/csv; charset=utf-8")
		c.Header("Content-Disposition", `attachment; filename="`+name+`"`)
		c.Status(http.StatusOK)
		w := csv.NewWriter(c.Writer)
		_ = w.Write(csvHeader)
		for _, m := range rep.Minutes {
			_ = w.Write(viewOf(m).record())
		}
		w.Flush()
		return
	}
	minutes := make([]minuteView, len(rep.Minutes))
	for i, m := range rep.Minutes {
		minutes[i] = viewOf(m)
	}
	totals := viewOf(rep.Totals)
	peak := func(m history.Minute, value int64) gin.H {
		if m.Start.IsZero() {
			return nil
		}
		return gin.H{"minute": m.Start, "value": value}
	}
	c.JSON(http.StatusOK, gin.H{
		"queueId": rep.QueueID, "from": rep.From, "to": rep.To,
		"totals": gin.H{
			"arrivals": totals.Arrivals, "admitted": totals.Admitted, "ordersCreated": totals.OrdersCreated,
			"ordersFailed": totals.OrdersFailed, "expiredUnused": totals.ExpiredUnused, "left": totals.Left,
			"abandoned": totals.Abandoned, "waitP50Ms": totals.WaitP50Ms, "waitP95Ms": totals.WaitP95Ms,
			"waitMaxMs": totals.WaitMaxMs, "conversion": rep.Totals.Conversion(),
		},
		"peaks": gin.H{
			"arrivals":      peak(rep.PeakArrivals, rep.PeakArrivals.Counts.Arrivals),
			"admitted":      peak(rep.PeakAdmitted, rep.PeakAdmitted.Counts.Admitted),
			"ordersCreated": peak(rep.PeakOrders, rep.PeakOrders.OrdersCreated),
			"waitMaxMs":     peak(rep.PeakWait, rep.PeakWait.Counts.WaitMax.Milliseconds()),
		},
		"minutes": minutes,
	})
}
