package main

import (
	"fmt"
	"math"
)

// enterCPU is the Redis CPU of an enter into a queue of k lines, in µs: on
// the busiest master, and over all masters. One and three lines were
// measured (BenchmarkShardedEnter); k lines are taken as three lines' work
// spread evenly over k masters.
func enterCPU(f Figures, k int) (busiest, all float64) {
	if k == 1 {
		return f["sh1_busy"], f["sh1_cpu"]
	}
	return f["sh3_busy"] * 3 / float64(k), f["sh3_cpu"]
}

// The frontier cache's pace (redisstore.FrontierOptions): a polled queue is
// read again after pollsPerRead lookups or fresh seconds, whichever comes
// first, in a round every roundSeconds at most.
const (
	pollsPerRead = 200
	fresh        = 1.5
	roundSeconds = 0.1
)

// frontierReads is the reads a second of one queue by one replica that
// answers lookups a second of it from its frontier cache.
func frontierReads(lookups float64) float64 {
	return min(1/roundSeconds, max(1/fresh, lookups/pollsPerRead))
}

// redis: the masters, for the enters on each queue's busiest master, the
// Redis CPU of everything, and the line's memory.
func (p *Plan) redis(f Figures, gateways, notify int) {
	t := p.Target
	budget := t.Headroom * 1e6 // µs a master may work a second
	entersQ := p.perQueue(t.Enters)
	k := 1
	for k < maxLines {
		if b, _ := enterCPU(f, k); entersQ*b <= budget {
			break
		}
		k++
	}
	busiest, all := enterCPU(f, k)
	if entersQ*busiest > budget {
		p.Over = append(p.Over, fmt.Sprintf("%s enters/s a queue is above %d lines' busiest master at %.0f %% (%s/s)", count(entersQ), maxLines, t.Headroom*100, count(budget/busiest)))
	}
	p.Lines = k

	cmdUS, readUS, admitUS := 1e6/f["zr_rps"], 1e6/f["ev_rps"], 1e6/f["ra0"]
	front := 2 * math.Ceil(p.perQueue(t.Admissions)*0.1) // the exact window: two admission batches
	nearFront := float64(t.Queues) * min(p.perQueue(t.Waiting), front)
	q := float64(t.Queues)
	reads := float64(gateways)*q*frontierReads(t.Polls/q/float64(gateways)) +
		float64(notify)*q*frontierReads(t.Streams/3/q/float64(notify))
	perRead := f["t_cpp"] * f["t_rps"] * roundSeconds // the bench's one gateway read its queue every round
	cpu := t.Enters*all + reads*perRead*cmdUS + nearFront*readUS + t.Admissions*(admitUS+2*readUS)
	perPerson := max(f["mem_per"], f["big_mem_per"])
	mem := t.Waiting * perPerson
	n := max(k, ceil(cpu/budget), ceil(mem/t.RedisMemory))
	p.Rows = append(p.Rows, Row{
		Component: "redis", Replicas: n, Unit: "masters", Cores: float64(n), Memory: mem,
		SizedBy: fmt.Sprintf("%s enters/s a queue in %d line(s): busiest master %.2f core, all %.2f cores busy",
			count(entersQ), k, entersQ*busiest/1e6, cpu/1e6),
		Wall: nearest(
			wall{budget / busiest / entersQ, fmt.Sprintf("enter: a queue's busiest master at %s enters/s in %d line(s)", count(budget/busiest), k)},
			wall{float64(n) * budget / cpu, fmt.Sprintf("CPU: these masters at %.2f cores busy", float64(n)*budget/1e6)},
			wall{float64(n) * t.RedisMemory / mem, fmt.Sprintf("memory: %s people a master", count(t.RedisMemory/perPerson))}),
	})
	p.Assumptions = append(p.Assumptions,
		fmt.Sprintf("Redis, an enter: %.2f µs of the busiest master's CPU with one line (sh1_busy), %.2f with three (sh3_busy), %.2f over all masters with three (sh3_cpu); k lines are taken as %.2f x 3 / k on the busiest master, not measured beyond three.", f["sh1_busy"], f["sh3_busy"], f["sh3_cpu"], f["sh3_busy"]),
		fmt.Sprintf("Redis, the ticket polls: every gateway and notification-service replica reads each queue it answers from its frontier once per %d lookups, at least every %.1f s and at most every %.1f s (FrontierCache, pkg/redisstore/frontier.go); a stream's position is a lookup every 3 s. Here %s reads/s. A read is %.1f commands (t_cpp %.4f x t_rps %s: the bench's one gateway read its queue every %.1f s) at %.2f µs a command (one ZRANK: redis-benchmark at %s/s on one Redis core, zr_rps; a command inside a script costs less): %.0f µs.",
			pollsPerRead, fresh, roundSeconds, count(reads), perRead, f["t_cpp"], count(f["t_rps"]), roundSeconds, cmdUS, count(f["zr_rps"]), perRead*cmdUS),
		fmt.Sprintf("Redis, a position read (a poll within two admission batches of the front, %s such people a queue, each polling every second): %.1f µs (redis-benchmark EVALSHA position.lua at %s/s: ev_rps).", count(front), readUS, count(f["ev_rps"])),
		fmt.Sprintf("Redis, an admission: %.1f µs (BenchmarkAdmitReplicated, replicas=0, %s/s on one Redis with the relay: ra0) and the order's consume and settle, counted as two position reads (not measured).", admitUS, count(f["ra0"])),
		fmt.Sprintf("Redis memory: %.1f bytes a person (the larger of mem_per %.1f and big_mem_per %.1f); a master's maxmemory %s (-redis-memory), noeviction. Each master has a replica (REDIS_WAIT_REPLICAS=1), not counted.", perPerson, f["mem_per"], f["big_mem_per"], bytes(t.RedisMemory)))
}

// A wall is a limit and how far the target can grow, as a factor, before it
// reaches it.
type wall struct {
	factor float64
	text   string
}

// nearest is the text of the wall the target reaches first.
func nearest(walls ...wall) string {
	w := walls[0]
	for _, o := range walls[1:] {
		if o.factor < w.factor {
			w = o
		}
	}
	return fmt.Sprintf("%s (%s)", w.text, times(w.factor))
}

// broker: RabbitMQ, the events of admission and ordering.
func (p *Plan) broker(f Figures, notifyReplicas int) {
	t := p.Target
	publishes := 2 * t.Admissions // TokenIssued, then OrderCreated or OrderFailed
	deliveries := t.Admissions * float64(notifyReplicas)
	relay := f["best"] * t.Headroom
	p.Rows = append(p.Rows, Row{
		Component: "rabbitmq", Replicas: 3, Unit: "nodes",
		SizedBy: fmt.Sprintf("%s publishes/s; TokenIssued to %d notification replicas: %s deliveries/s", count(publishes), notifyReplicas, count(deliveries)),
		Wall:    fmt.Sprintf("a dispatcher's relay: %s TokenIssued/s (%s)", count(relay), times(relay/p.perQueue(t.Admissions))),
	})
	p.Assumptions = append(p.Assumptions,
		fmt.Sprintf("RabbitMQ: a TokenIssued and an order event an admission (TokenExpired or TokenRestored add up to one more for those who do not buy); every notification-service replica gets every TokenIssued (fan-out). The relay published %s/s with confirms on the bench machine (best); the broker alone was not measured. Three nodes: the quorum queues need a majority.", count(f["best"])))
}

// postgres: one primary, the hot product row.
func (p *Plan) postgres(f Figures) {
	t := p.Target
	orders := p.perQueue(t.Admissions)
	limit := f["hot_group"] * t.Headroom
	p.Rows = append(p.Rows, Row{
		Component: "postgres", Replicas: 1, Unit: "primary",
		SizedBy: fmt.Sprintf("%s orders/s on a queue's one product", count(orders)),
		Wall:    fmt.Sprintf("the product row: %s orders/s with group commit (%s)", count(limit), times(limit/orders)),
	})
	if orders > limit {
		p.Over = append(p.Over, fmt.Sprintf("%s orders/s on one product is above its row at %.0f %% (%s/s)", count(orders), t.Headroom*100, count(limit)))
	}
	p.Assumptions = append(p.Assumptions,
		fmt.Sprintf("Postgres: one product row took %s orders/s with group commit (hot_group), %s a transaction an order (hot_alone), %s of pgbench's bare conditional UPDATE (pg_tps). A standby beside the primary is not counted; its cores were not measured.", count(f["hot_group"]), count(f["hot_alone"]), count(f["pg_tps"])))
}
