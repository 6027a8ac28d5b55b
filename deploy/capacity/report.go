package main

import (
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"text/tabwriter"
)

// report prints the plan: the target, the table, what is beyond a wall and
// the assumptions.
func report(out io.Writer, path string, f Figures, p Plan) error {
	t := p.Target
	var b strings.Builder
	fmt.Fprintf(&b, "Capacity plan from %s (make bench on %s, %.0f cores)\n", path, f.measured(), f["cores"])
	fmt.Fprintf(&b, "Target: %s waiting in %d queue(s); %s ticket polls/s; %s enters/s; %s admissions/s; %s open streams; headroom %.2f\n",
		count(t.Waiting), t.Queues, count(t.Polls), count(t.Enters), count(t.Admissions), count(t.Streams), t.Headroom)
	for _, d := range p.Derived {
		fmt.Fprintf(&b, "  %s\n", d)
	}
	b.WriteString("\nNext wall: what a row runs out of first as the figures it is sized by grow, and at how many times those figures (x).\n\n")
	tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "component\treplicas\tcores\tmemory\tsized by\tnext wall")
	for _, r := range p.Rows {
		fmt.Fprintf(tw, "%s\t%d %s\t%s\t%s\t%s\t%s\n", r.Component, r.Replicas, r.Unit, cores(r.Cores), bytes(r.Memory), r.SizedBy, r.Wall)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if len(p.Over) > 0 {
		b.WriteString("\nBeyond a wall:\n")
		for _, o := range p.Over {
			fmt.Fprintf(&b, "- %s\n", o)
		}
	}
	b.WriteString("\nAssumptions (the measured figure each comes from, by its name in the figures file):\n")
	for _, a := range p.Assumptions {
		fmt.Fprintf(&b, "- %s\n", a)
	}
	_, err := io.WriteString(out, b.String())
	return err
}

// count is x rounded to a whole number with thousands separated, or to a
// tenth below ten.
func count(x float64) string {
	if x < 10 && x != math.Trunc(x) {
		return strconv.FormatFloat(x, 'f', 1, 64)
	}
	s := strconv.FormatInt(int64(math.Round(x)), 10)
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}

// bytes is n in GiB, MiB or KiB; "-" for 0, not measured.
func bytes(n float64) string {
	switch {
	case n <= 0:
		return "-"
	case n >= gib:
		return fmt.Sprintf("%.2f GiB", n/gib)
	case n >= 1<<20:
		return fmt.Sprintf("%.0f MiB", n/(1<<20))
	}
	return fmt.Sprintf("%.0f KiB", n/(1<<10))
}

// times is how many times the target a wall is at: x1.23, x34.3, x6,857.
func times(f float64) string {
	switch {
	case math.IsInf(f, 1) || math.IsNaN(f):
		return "not reached"
	case f >= 100:
		return "x" + count(f)
	case f >= 10:
		return fmt.Sprintf("x%.1f", f)
	}
	return fmt.Sprintf("x%.2f", f)
}

// cores is n; "-" for 0, not measured.
func cores(n float64) string {
	if n <= 0 {
		return "-"
	}
	return count(n)
}
