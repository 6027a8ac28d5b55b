package httpapi_test

import (
	"context"
	"net/http"
	"testing"

	"github.com/waitingroom/waitingroom/pkg/redisstore"
)

// TestAdaptiveKnobsAndEffectiveRateOverHTTP: the adaptive knobs are set and
// shown; a range with min over max is a 400 naming the field and writes
// nothing; once a leader recorded an effective rate, the admin view shows
// it and why, and the public view's admissionRatePerSec is it (the rate
// the ETAs follow).
func TestAdaptiveKnobsAndEffectiveRateOverHTTP(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	admin := h.admin()
	q := h.newQueue(map[string]any{"admissionMode": "ADAPTIVE", "minAdmissionRatePerSec": 5, "maxAdmissionRatePerSec": 60,
		"targetOrderLatencyMs": 400, "admissionRatePerSec": 60})
	path := "/admin/v1/queues/" + q
	type view struct {
		AdmissionMode          string  `json:"admissionMode"`
		MinAdmissionRatePerSec float64 `json:"minAdmissionRatePerSec"`
		MaxAdmissionRatePerSec float64 `json:"maxAdmissionRatePerSec"`
		TargetOrderLatencyMs   int64   `json:"targetOrderLatencyMs"`
		EffectiveRatePerSec    float64 `json:"effectiveRatePerSec"`
		RateReason             string  `json:"rateReason"`
		AdmissionRatePerSec    float64 `json:"admissionRatePerSec"`
	}
	var v view
	h.must(http.MethodGet, path, admin, nil).json(t, &v)
	if v.AdmissionMode != "ADAPTIVE" || v.MinAdmissionRatePerSec != 5 || v.MaxAdmissionRatePerSec != 60 || v.TargetOrderLatencyMs != 400 || v.EffectiveRatePerSec != 0 {
		t.Fatalf("admin view: %+v", v)
	}
	r := h.must(http.MethodPut, path, admin, map[string]any{"minAdmissionRatePerSec": 80})
	if p := r.problem(t, http.StatusBadRequest, "validation-failed"); len(p.Errors) != 1 || p.Errors[0].Field != "maxAdmissionRatePerSec" {
		t.Errorf("min over max: %+v", p)
	}
	h.must(http.MethodGet, path, admin, nil).json(t, &v)
	if v.MinAdmissionRatePerSec != 5 {
		t.Errorf("a refused PUT changed min to %v", v.MinAdmissionRatePerSec)
	}

	k := redisstore.KeysFor(q)
	if err := h.rdb.HSet(context.Background(), k.Dispatch(), "effectiveRate", "21.35", "rateReason", "DECREASE: order p95 900ms over the 400ms target").Err(); err != nil {
		t.Fatal(err)
	}
	h.must(http.MethodGet, path, admin, nil).json(t, &v)
	if v.EffectiveRatePerSec != 21.35 || v.RateReason != "DECREASE: order p95 900ms over the 400ms target" || v.AdmissionRatePerSec != 60 {
		t.Errorf("admin view with an effective rate: %+v", v)
	}
	var pub view
	h.must(http.MethodGet, "/api/v1/queues/"+q, "", nil).json(t, &pub)
	if pub.AdmissionRatePerSec != 21.35 {
		t.Errorf("public admissionRatePerSec %v, want the effective 21.35", pub.AdmissionRatePerSec)
	}
	if _, st, err := h.enter(q, "a"); err != nil || st.AdmissionRatePerSec != 21.35 {
		t.Errorf("enter's admissionRatePerSec %v (%v), want 21.35", st.AdmissionRatePerSec, err)
	}
}
