package main

import (
	"fmt"
	"math"
)

// Target is what the plan is for. Waiting, Polls, Enters, Admissions and
// Streams are totals over Queues queues of equal size.
type Target struct {
	Waiting    float64
	Polls      float64 // below 0: derived from the places and the poll interval
	Enters     float64 // below 0: Waiting arriving within EnterWindow
	Admissions float64
	Streams    float64 // below 0: Waiting x Share
	Share      float64 // of the pages, those with an event stream open
	Queues     int
	Headroom   float64 // the share of a core (and of a measured rate) planned to be used

	ReplicaCores float64 // cores of a gateway or order-service replica
	StreamMemory float64 // bytes a notification-service replica may hold in streams
	RedisMemory  float64 // maxmemory of a Redis master, bytes
	MaxPoll      float64 // the longest poll interval, seconds (queue.MaxRetryAfter)
	EnterWindow  float64 // seconds
}

// A Row is one component of the plan.
type Row struct {
	Component string
	Replicas  int
	Unit      string  // what Replicas counts
	Cores     float64 // 0: not measured
	Memory    float64 // bytes; 0: not measured
	SizedBy   string
	Wall      string
}

// A Plan is the sizing of every component for a Target.
type Plan struct {
	Target      Target   // with the derived figures filled in
	Derived     []string // how they were derived
	Lines       int      // lines (shards) a queue is split into
	Rows        []Row
	Assumptions []string
	Over        []string // where the target is beyond a wall
}

// maxLines is the most lines a queue can be split into (shards).
const maxLines = 64

// size plans t from the measured figures f.
func size(f Figures, t Target) Plan {
	p := Plan{Target: t}
	p.derive(f)
	gateways := p.gateway(f)
	notify := p.notification(f)
	p.dispatcher(f)
	p.orders(f)
	p.redis(f, gateways, notify)
	p.broker(f, notify)
	p.postgres(f)
	p.Assumptions = append(p.Assumptions,
		fmt.Sprintf("The bench machine has %.0f cores (cores), shared by the load generator, the service and the server: every per-core figure is a floor.", f["cores"]),
		fmt.Sprintf("Headroom %.2f: a core, and a measured rate, is planned at %.0f %% of what was measured; memory budgets are used whole.", t.Headroom, t.Headroom*100))
	return p
}

// perQueue is a total spread over the queues.
func (p *Plan) perQueue(total float64) float64 { return total / float64(p.Target.Queues) }

// derive fills in the targets left to be derived.
func (p *Plan) derive(f Figures) {
	t := &p.Target
	if t.Streams < 0 {
		t.Streams = t.Waiting * t.Share
		p.Derived = append(p.Derived, fmt.Sprintf("streams %s: waiting x %.2f (-share)", count(t.Streams), t.Share))
	}
	if t.Enters < 0 {
		t.Enters = t.Waiting / t.EnterWindow
		p.Derived = append(p.Derived, fmt.Sprintf("enters %s/s: waiting arriving within %.0f s (-enters to set)", count(t.Enters), t.EnterWindow))
	}
	if t.Polls < 0 {
		polling := 1.0
		if t.Waiting > 0 {
			polling = min(max(1-t.Streams/t.Waiting, 0), 1)
		}
		one := pollRate(int64(p.perQueue(t.Waiting)), p.perQueue(t.Admissions), t.MaxPoll)
		t.Polls = float64(t.Queues) * one * polling
		p.Derived = append(p.Derived, fmt.Sprintf(
			"polls %s/s: a queue of %s polling at RetryAfter gives %s/s; x %d queue(s); x %.2f, the pages without a stream (a page with its stream open does not poll)",
			count(t.Polls), count(p.perQueue(t.Waiting)), count(one), t.Queues, polling))
	}
}

// gateway: CPU, for the ticket polls and the enters.
func (p *Plan) gateway(f Figures) int {
	t := p.Target
	pollUS := f["big_cpu"] // ms per 1,000 polls is µs a poll
	reqUS := f["gw_cpu_pct"] / 100 * 1e6 / f["gw_cpu_rps"]
	enterUS := reqUS * f["p_rps"] / f["e_rps"]
	busy := (t.Polls*pollUS + t.Enters*enterUS) / 1e6
	n := max(2, ceil(busy/t.Headroom/t.ReplicaCores))
	budget := t.ReplicaCores * t.Headroom * 1e6
	p.Rows = append(p.Rows, Row{
		Component: "queue-gateway", Replicas: n, Unit: "replicas", Cores: float64(n) * t.ReplicaCores,
		SizedBy: fmt.Sprintf("%s polls/s, %s enters/s: %.2f cores busy", count(t.Polls), count(t.Enters), busy),
		Wall: fmt.Sprintf("CPU: these full at %s; +1 per %s polls/s or %s enters/s",
			times(float64(n)*budget/1e6/busy), count(budget/pollUS), count(budget/enterUS)),
	})
	p.Assumptions = append(p.Assumptions,
		fmt.Sprintf("Gateway replicas of %.0f cores (-replica-cores), order-service replicas too.", t.ReplicaCores),
		fmt.Sprintf("Gateway, a ticket poll: %.1f ms of gateway CPU per 1,000 polls (big_cpu, the process's own CPU time in a line of a million): %s polls/s a core.", pollUS, count(1e6/pollUS)),
		fmt.Sprintf("Gateway, an enter: its CPU was not measured. The profiled position run used %.0f %% of a core (gw_cpu_pct) at %s requests/s (gw_cpu_rps), %.1f µs a request; scaled by position/enter throughput %s/%s (p_rps/e_rps): %.1f µs an enter, %s enters/s a core.",
			f["gw_cpu_pct"], count(f["gw_cpu_rps"]), reqUS, count(f["p_rps"]), count(f["e_rps"]), enterUS, count(1e6/enterUS)),
		"Gateway: enters and polls are counted at once (the last of the first minute's entrants arrive while everyone before them polls); replicas at least 2.")
	return n
}

// notification: memory, for the open streams.
func (p *Plan) notification(f Figures) int {
	t := p.Target
	mem := t.Streams * f["sse_rss"]
	n := max(2, ceil(mem/t.StreamMemory))
	p.Rows = append(p.Rows, Row{
		Component: "notification-service", Replicas: n, Unit: "replicas", Memory: mem,
		SizedBy: fmt.Sprintf("%s streams x %s B", count(t.Streams), count(f["sse_rss"])),
		Wall: fmt.Sprintf("memory: these full at %s; +1 per %s streams",
			times(float64(n)*t.StreamMemory/mem), count(t.StreamMemory/f["sse_rss"])),
	})
	p.Assumptions = append(p.Assumptions,
		fmt.Sprintf("Notification-service: %s bytes of RSS a stream at 10,000 streams (sse_rss); the kernel's socket buffers are not in it, and the CPU of the position events (a stream's every 3 s, SSE_POSITION_INTERVAL) was not measured, so its cores are not planned.", count(f["sse_rss"])))
	return n
}

// dispatcher: one leader a queue, at the rate one leader sustained.
func (p *Plan) dispatcher(f Figures) {
	t := p.Target
	limit := f["best"] * t.Headroom
	n := max(2, ceil(t.Admissions/limit)+1)
	p.Rows = append(p.Rows, Row{
		Component: "admission-dispatcher", Replicas: n, Unit: "replicas",
		SizedBy: fmt.Sprintf("%s admissions/s, %d queue(s): leaders + 1 standby", count(t.Admissions), t.Queues),
		Wall:    fmt.Sprintf("a queue's one leader: %s admissions/s (%s)", count(limit), times(limit/p.perQueue(t.Admissions))),
	})
	if q := p.perQueue(t.Admissions); q > limit {
		p.Over = append(p.Over, fmt.Sprintf("%s admissions/s a queue is above what one leader sustains at %.0f %% (%s/s)", count(q), t.Headroom*100, count(limit)))
	}
	p.Assumptions = append(p.Assumptions,
		fmt.Sprintf("Dispatcher: one leader sustained %s admissions/s (best, the ramp's last step at >= 97 %%; the relay publishing to the broker bounds it on the bench machine); a replica leads any number of queues within that. Its CPU was not measured.", count(f["best"])))
}

// orders: the order-service, the order path's CPU.
func (p *Plan) orders(f Figures) {
	t := p.Target
	perCore := f["hot_group"] / f["cores"]
	n := max(2, ceil(t.Admissions/(perCore*t.Headroom*t.ReplicaCores)))
	p.Rows = append(p.Rows, Row{
		Component: "order-service", Replicas: n, Unit: "replicas", Cores: float64(n) * t.ReplicaCores,
		SizedBy: fmt.Sprintf("%s orders/s: %.2f cores busy", count(t.Admissions), t.Admissions/perCore),
		Wall: fmt.Sprintf("CPU: these full at %s; the product row first (postgres)",
			times(float64(n)*perCore*t.Headroom*t.ReplicaCores/t.Admissions)),
	})
	p.Assumptions = append(p.Assumptions,
		fmt.Sprintf("Orders: every admission orders once (the most the order path sees). The order-service's CPU was not measured alone: the hot-row benchmark ran the order path and Postgres on the %.0f cores at %s orders/s (hot_group), so a core is taken as %s orders/s (%.0f µs an order).", f["cores"], count(f["hot_group"]), count(perCore), 1e6/perCore))
}

// ceil is x rounded up, as a count.
func ceil(x float64) int { return int(math.Ceil(x - 1e-9)) }
