package main

import (
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// testdata/figures.json is a copy of docs/benchmarks.json as written by
// hand from BENCHMARKS.md of 2026-12-03, fixed so these counts stay put
// when make bench writes new figures. The ones the counts below use:
//
//	big_cpu 27.1 (µs of gateway CPU a ticket poll), gw_cpu_pct 108,
//	gw_cpu_rps 10,508.60, p_rps 10,911.65, e_rps 9,497.47, sse_rss 8,097,
//	best 10,000, hot_group 9,791, cores 2, sh1_busy 50.09, sh3_busy 23.91,
//	sh3_cpu 69.18, t_cpp 0.0067, t_rps 34,223.81, zr_rps 107,488.36,
//	ev_rps 34,002.04, ra0 19,831, mem_per 124.2.
const testFigures = "testdata/figures.json"

func TestPollInterval(t *testing.T) {
	for _, c := range []struct {
		name       string
		p, rate    float64
		want       float64
		wantCapped bool
	}{
		{"in the first hundred", 100, 175, 1, false},
		{"half the wait below 1 s", 300, 175, 1, false},           // 300 / 175 / 2 = 0.857 s, raised to 1 s
		{"half the wait shorter", 1000, 175, 1000.0 / 350, false}, // 1 + log2(10) = 4.32 s > 2.857 s
		{"a doubling is a second", 400, 0.01, 3, false},           // 1 + log2(4); half the wait 20,000 s
		{"at the cap", 51200, 175, 10, true},                      // 1 + log2(512) = 10 s, half the wait 146 s
		{"far back", 1e7, 175, 10, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, capped := pollInterval(c.p, c.rate, 10)
			if math.Abs(got-c.want) > 1e-9 || capped != c.wantCapped {
				t.Errorf("pollInterval(%v, %v, 10) = %v, %v; want %v, %v", c.p, c.rate, got, capped, c.want, c.wantCapped)
			}
		})
	}
}

func TestPollRate(t *testing.T) {
	// A hundred people poll every second.
	if got := pollRate(100, 175, 10); got != 100 {
		t.Errorf("100 people: %v polls/s, want 100", got)
	}
	// Everyone from place 51,200 on polls every 10 s, so 900,000 more
	// people far back add 90,000 polls/s exactly.
	if d := pollRate(1e6, 175, 10) - pollRate(1e5, 175, 10); math.Abs(d-90000) > 1e-6 {
		t.Errorf("900,000 more far back: %v more polls/s, want 90,000", d)
	}
	// The front, places 1 to 51,199, by hand at 175 admissions/s:
	// places 1 to 350 poll every second (half of p / 175 s is at most 1 s):
	// 350; places 351 to 1,813 at half their wait, p / 350 s (shorter than
	// 1 + log2(p / 100) up to place 1,813): 350 x ln(1,813.5 / 350.5) = 575;
	// places 1,814 to 51,199 every 1 + log2(p / 100) s: the integral
	// 50 ln 2 x (Ei(10 ln 2) - Ei(5.18 ln 2)) = 34.66 x (181.08 - 14.80) =
	// 5,763. In all about 6,688 polls/s.
	if got := pollRate(51199, 175, 10); math.Abs(got-6688) > 0.005*6688 {
		t.Errorf("the first 51,199 places: %.1f polls/s, want 6,688 within 0.5 %%", got)
	}
}

func TestSizing(t *testing.T) {
	f, err := loadFigures(testFigures)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name      string
		args      []string
		wantPolls float64
		want      map[string]int
		wantLines int
		wantOver  int
	}{
		{
			// streams 300,000 (0.3); enters 1,000,000 / 60 s = 16,667/s;
			// polls 0.7 x (6,688 + (1,000,000 - 51,199) / 10) = 0.7 x 101,568 = 71,097/s.
			// gateway: an enter 108 % / 10,508.60 x 10,911.65 / 9,497.47 = 118.08 µs;
			//   71,097 x 27.1 + 16,667 x 118.08 = 1.927 + 1.968 = 3.895 cores busy;
			//   / 0.6 = 6.49 cores, / 2 a replica = 3.25: 4 replicas.
			// notification: 300,000 x 8,097 B = 2.43e9 B / 1 GiB = 2.26: 3.
			// dispatcher: 175 / (10,000 x 0.6) = 0.03: 1 leader + 1 standby = 2.
			// orders: 175 / (9,791 / 2 x 0.6 x 2 = 5,875) = 0.03: at least 2.
			// redis: one line, 16,667 x 50.09 µs = 0.835 s a second > 0.6; two
			//   lines, 23.91 x 3 / 2 = 35.87 µs: 0.598 <= 0.6: 2 lines. All of
			//   Redis: 16,667 x 69.18 = 1.153 s; frontier reads: 4 gateways
			//   (17,774 polls/s each) and 3 notification replicas (33,333 stream
			//   lookups/s each) read the queue every 0.1 s, 70 reads/s x
			//   (0.0067 x 34,224 x 0.1 = 22.9 commands) x 9.30 µs = 0.015 s; 36
			//   front reads x 29.4 µs = 0.001 s; 175 admissions x (50.4 + 2 x
			//   29.4) µs = 0.019 s: 1.188 cores / 0.6 = 1.98: 2 masters; memory
			//   124.2 MB in one 4 GiB master.
			name: "1M waiting", args: []string{"-waiting", "1000000"}, wantPolls: 71097,
			want:      map[string]int{"queue-gateway": 4, "notification-service": 3, "admission-dispatcher": 2, "order-service": 2, "redis": 2, "rabbitmq": 3, "postgres": 1},
			wantLines: 2,
		},
		{
			// streams 3,000,000; enters 166,667/s;
			// polls 0.7 x (6,688 + (10,000,000 - 51,199) / 10) = 0.7 x 1,001,568 = 701,097/s.
			// gateway: 701,097 x 27.1 + 166,667 x 118.08 = 19.00 + 19.68 = 38.68
			//   cores busy; / 0.6 = 64.5 cores, / 2 = 32.2: 33 replicas.
			// notification: 3,000,000 x 8,097 B = 24.29e9 B / 1 GiB = 22.6: 23.
			// dispatcher 2, orders 2, as above.
			// redis: lines k with 166,667 x 71.73 / k µs <= 0.6 s: k >= 19.93, 20
			//   lines. All of Redis: 166,667 x 69.18 = 11.530 s; (33 + 23)
			//   replicas x 10 frontier reads x 213 µs = 0.119 s; + 0.001 + 0.019
			//   = 11.670 cores / 0.6 = 19.45: 20 masters (and 20 for the lines);
			//   memory 1.24 GB.
			name: "10M waiting", args: []string{"-waiting", "10000000"}, wantPolls: 701097,
			want:      map[string]int{"queue-gateway": 33, "notification-service": 23, "admission-dispatcher": 2, "order-service": 2, "redis": 20, "rabbitmq": 3, "postgres": 1},
			wantLines: 20,
		},
		{
			// 8,000 admissions/s on one queue: above one leader's 6,000 and
			// the product row's 9,791 x 0.6 = 5,875. Dispatcher: 8,000 /
			// 6,000 = 1.33: 2 + 1 standby = 3. Orders: 8,000 / 5,875 = 1.36: 2.
			// Polls: half the wait, p / 16,000 s, is below 1 s for all
			// 10,000 places, so everyone polls every second: x 0.7 = 7,000.
			// Gateway: 7,000 x 27.1 + 166.7 x 118.08 = 0.209 cores: 2.
			// Redis: 167 enters/s x 50.09 = 0.008 s a second, one line. All
			//   of it: 167 x 50.34 = 0.008 s; frontier reads: 2 gateways at
			//   3,500 polls/s (10 reads/s each) and 2 notification replicas at
			//   500 lookups/s (2.5 reads/s each), 25 x 213 µs = 0.005 s; 1,600
			//   front reads (2 batches of 800) x 29.4 µs = 0.047 s; 8,000
			//   admissions x (50.4 + 2 x 29.4) µs = 0.874 s: 0.93 cores / 0.6 =
			//   1.56: 2 masters.
			name: "beyond a leader and a product row", args: []string{"-waiting", "10000", "-admissions", "8000"}, wantPolls: 7000,
			want:      map[string]int{"queue-gateway": 2, "notification-service": 2, "admission-dispatcher": 3, "order-service": 2, "redis": 2, "rabbitmq": 3, "postgres": 1},
			wantLines: 1, wantOver: 2,
		},
	} {
		t.Run(c.name, func(t *testing.T) {
			target, _, err := parse(c.args)
			if err != nil {
				t.Fatal(err)
			}
			p := size(f, target)
			if math.Abs(p.Target.Polls-c.wantPolls) > 0.001*c.wantPolls {
				t.Errorf("polls %.0f/s, want %.0f within 0.1 %%", p.Target.Polls, c.wantPolls)
			}
			got := map[string]int{}
			for _, r := range p.Rows {
				got[r.Component] = r.Replicas
			}
			for name, want := range c.want {
				if got[name] != want {
					t.Errorf("%s: %d, want %d", name, got[name], want)
				}
			}
			if len(got) != len(c.want) {
				t.Errorf("components %v, want those of %v", got, c.want)
			}
			if p.Lines != c.wantLines {
				t.Errorf("lines a queue: %d, want %d", p.Lines, c.wantLines)
			}
			if len(p.Over) != c.wantOver {
				t.Errorf("beyond a wall: %q, want %d of them", p.Over, c.wantOver)
			}
		})
	}
}

func TestMissingFiguresAreNamed(t *testing.T) {
	data, err := os.ReadFile(testFigures)
	if err != nil {
		t.Fatal(err)
	}
	s := strings.Replace(string(data), `"big_cpu": 27.1,`, "", 1)
	s = strings.Replace(s, `"sse_rss": 8097,`, `"sse_rss": 0,`, 1)
	path := filepath.Join(t.TempDir(), "figures.json")
	if err := os.WriteFile(path, []byte(s), 0o644); err != nil {
		t.Fatal(err)
	}
	err = realMain([]string{"-figures", path}, &strings.Builder{})
	if err == nil {
		t.Fatal("no error with big_cpu missing and sse_rss 0")
	}
	for _, name := range []string{"big_cpu", "sse_rss"} {
		if !strings.Contains(err.Error(), name) {
			t.Errorf("the error does not name %s: %v", name, err)
		}
	}
}

func TestReportNamesEveryComponentAndFigure(t *testing.T) {
	var out strings.Builder
	if err := realMain([]string{"-figures", testFigures, "-waiting", "1000000"}, &out); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"queue-gateway         4 replicas", "redis                 2 masters", "(big_cpu", "(sh1_busy)", "(hot_group)", "(sse_rss)", "(best"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("the report lacks %q:\n%s", want, out.String())
		}
	}
}
