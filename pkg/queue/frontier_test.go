package queue

import "testing"

// A line of places 1..10,000 with leavers every tenth number (1,000 of
// them), admission at 100 (the last admitted), read as the cache reads it:
// fine bins from Last's to 2048, coarse bins from there to 4096, the rest
// (numbers 4096..10,000) as Beyond.
func testFrontier() *Frontier {
	left := func(from, to int64) int64 { // leavers numbered in [from, to)
		n := int64(0)
		for s := from; s < to; s++ {
			if s%10 == 5 && s > 100 {
				n++
			}
		}
		return n
	}
	f := &Frontier{QueueID: "q", QueueState: Open, Generation: 7, ConfiguredRate: 100,
		Last: 100, Tail: 10_000, Usable: true, FineFrom: 101 / FineBin, CoarseFrom: 2048 / CoarseBin}
	f.FirstLeft = left(101, (f.FineFrom+1)*FineBin)
	for b := f.FineFrom; b < 2048/FineBin; b++ {
		f.Fine = append(f.Fine, left(b*FineBin, (b+1)*FineBin))
	}
	for c := f.CoarseFrom; c < 4096/CoarseBin; c++ {
		f.Coarse = append(f.Coarse, left(c*CoarseBin, (c+1)*CoarseBin))
	}
	f.Beyond = left(4096, 10_001)
	f.Waiting = 10_000 - 100 - left(101, 10_001)
	return f
}

func TestFrontierPlace(t *testing.T) {
	f := testFrontier()
	exact := func(seq int64) int64 { // waiting numbers in (100, seq], seq waiting
		n := int64(0)
		for s := int64(101); s <= seq; s++ {
			if s%10 != 5 {
				n++
			}
		}
		return n
	}
	for _, seq := range []int64{101, 110, 117, 500, 2047, 2048, 2049, 3000, 4095, 4096, 4097, 7000, 9999, 10_000} {
		want, got := exact(seq), f.Place(seq)
		// Within the bin a number cuts, its leavers are spread evenly:
		// off by one at most here (a leaver every tenth number).
		if d := got - want; d < -1 || d > 1 {
			t.Errorf("Place(%d) = %d, exact %d", seq, got, want)
		}
	}
}

func TestFrontierStandingRefusesWhatOnlyRedisKnows(t *testing.T) {
	base := testFrontier()
	if st, ok := base.Standing(7, 5000); !ok || st.State != Waiting || st.Total != base.Waiting || st.QueueID != "q" {
		t.Fatalf("a place far from the front: %+v %v", st, ok)
	}
	cases := map[string]struct {
		mut      func(*Frontier)
		gen, seq int64
	}{
		"another generation":           {nil, 8, 5000},
		"admitted (at the frontier)":   {nil, 7, 100},
		"behind the frontier":          {nil, 7, 50},
		"past the tail":                {nil, 7, 10_001},
		"near the front (two batches)": {nil, 7, 115},
		"closed queue":                 {func(f *Frontier) { f.QueueState = Closed }, 7, 5000},
		"bins not usable":              {func(f *Frontier) { f.Usable = false }, 7, 5000},
		"frontier past the bins read":  {func(f *Frontier) { f.Last = 2100 }, 7, 5000},
		"beyond the line (a leaver)":   {func(f *Frontier) { f.Waiting = 100 }, 7, 5000},
	}
	for name, c := range cases {
		f := *base
		if c.mut != nil {
			c.mut(&f)
		}
		if st, ok := f.Standing(c.gen, c.seq); ok {
			t.Errorf("%s: answered %+v, want Redis", name, st)
		}
	}
	var none *Frontier
	if _, ok := none.Standing(7, 5000); ok {
		t.Error("no frontier answered")
	}
	if w := base.ExactWindow(); w != 20 {
		t.Errorf("exact window at 100/s: %d, want 20 (two batches of 10)", w)
	}
}

// Index changes how Place adds the bins up, never the answer: at every
// number of the test line, and after the frontier moved on (an announced
// move copies a Frontier and keeps its totals).
func TestFrontierIndexKeepsEveryPlace(t *testing.T) {
	walked, indexed := testFrontier(), testFrontier().Index()
	for seq := int64(101); seq <= 10_000; seq++ {
		if a, b := walked.Place(seq), indexed.Place(seq); a != b {
			t.Fatalf("Place(%d): %d walking the bins, %d from their running totals", seq, a, b)
		}
	}
	moved, movedIndexed := *walked, *indexed
	moved.Last, movedIndexed.Last = 300, 300
	moved.FirstLeft, movedIndexed.FirstLeft = 1, 1
	checked := 0
	for seq := int64(301); seq <= 10_000; seq += 7 {
		if a, b := moved.Place(seq), movedIndexed.Place(seq); a != b {
			t.Fatalf("after a move, Place(%d): %d walking, %d indexed", seq, a, b)
		}
		checked++
	}
	if checked != 1386 {
		t.Fatalf("checked %d places after the move, want 1386", checked)
	}
}
