// Command bare is the ceiling for the gateway's position route on this
// machine: a plain net/http handler that answers GET
// /api/v1/queues/{q}/position with a position body of the same shape and
// size, doing no auth and no Redis. Build with GOWORK=off.
package main

import (
	"flag"
	"log"
	"net/http"
	"strconv"
	"sync/atomic"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:18090", "listen address")
	flag.Parse()
	var n atomic.Int64
	mux := http.NewServeMux()
	h := func(w http.ResponseWriter, r *http.Request) {
		pos := n.Add(1)%10000 + 1
		body := `{"queueId":"` + r.PathValue("q") + `","state":"WAITING","queueState":"OPEN","position":` +
			strconv.FormatInt(pos, 10) + `,"ahead":` + strconv.FormatInt(pos-1, 10) +
			`,"total":10000,"etaSeconds":57,"retryAfterMs":5000,"admissionRatePerSec":175,"measuredRatePerSec":175}`
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Retry-After", "5")
		w.Header().Set("Cache-Control", "no-store")
		_, _ = w.Write([]byte(body))
	}
	mux.HandleFunc("GET /api/v1/queues/{q}/position", h)
	mux.HandleFunc("POST /api/v1/queues/{q}/enter", h)
	log.Fatal(http.ListenAndServe(*addr, mux))
}
