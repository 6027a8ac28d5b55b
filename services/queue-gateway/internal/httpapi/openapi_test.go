package httpapi_test

import (
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"regexp"
	"slices"
	"testing"

	"github.com/gin-gonic/gin"
	"github.com/goccy/go-yaml"

	"github.com/waitingroom/waitingroom/pkg/httpserver"
	"github.com/waitingroom/waitingroom/pkg/queue"
	"github.com/waitingroom/waitingroom/services/queue-gateway/internal/httpapi"
)

// The OpenAPI document and the router describe the same API: every route is
// documented and every documented operation is routed (dev mode and the page
// on, so every optional route exists).
func TestOpenAPIMatchesTheRoutes(t *testing.T) {
	t.Parallel()
	h := newHarness(t, withPage(pageConfig, true))
	routes := httpserver.RoutesOf(h.h.(interface{ Unwrap() http.Handler }).Unwrap().(*gin.Engine))
	ops, err := httpserver.OperationsOf(httpapi.OpenAPI)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(routes, ops) {
		t.Fatalf("routes and OpenAPI operations differ:\nroutes:  %v\nopenapi: %v", routes, ops)
	}
	if len(routes) != 28 {
		t.Fatalf("%d routes, want 28", len(routes))
	}
	if r := h.must("GET", "/openapi.yaml", "", nil); r.status != 200 || string(r.body) != string(httpapi.OpenAPI) {
		t.Fatalf("GET /openapi.yaml: %d", r.status)
	}
}

// The queue knobs the document describes are the ones the Config has, with
// its defaults, and the adaptive ones with the bounds the validation holds;
// the admin view's rateReason pattern takes every controller decision.
func TestOpenAPIQueueKnobs(t *testing.T) {
	t.Parallel()
	type schema struct {
		Ref        string            `yaml:"$ref"`
		Properties map[string]schema `yaml:"properties"`
		AllOf      []schema          `yaml:"allOf"`
		Default    any               `yaml:"default"`
		Minimum    *float64          `yaml:"minimum"`
		Maximum    *float64          `yaml:"maximum"`
		Enum       []string          `yaml:"enum"`
		Pattern    string            `yaml:"pattern"`
	}
	var doc struct {
		Components struct {
			Schemas map[string]schema `yaml:"schemas"`
		} `yaml:"components"`
	}
	if err := yaml.Unmarshal(httpapi.OpenAPI, &doc); err != nil {
		t.Fatal(err)
	}
	knobs := doc.Components.Schemas["QueueKnobs"].Properties

	b, err := json.Marshal(queue.DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	var defaults map[string]any
	if err := json.Unmarshal(b, &defaults); err != nil {
		t.Fatal(err)
	}
	defaults["startsAt"] = nil // omitted while unset
	for _, name := range []string{"admissionRatePerSec", "admissionMode", "minAdmissionRatePerSec",
		"maxAdmissionRatePerSec", "targetOrderLatencyMs", "failMode"} {
		if _, ok := knobs[name]; !ok {
			t.Errorf("QueueKnobs does not document %s", name)
		}
	}
	for _, name := range slices.Sorted(maps.Keys(knobs)) {
		v, ok := defaults[name]
		p := knobs[name]
		switch {
		case !ok:
			t.Errorf("QueueKnobs documents %s, which the Config does not have", name)
		case p.Ref == "" && name != "startsAt" && fmt.Sprint(p.Default) != fmt.Sprint(v):
			t.Errorf("%s: documented default %v, DefaultConfig %v", name, p.Default, v)
		}
	}

	bounds := []struct {
		name     string
		min, max float64
	}{
		{"minAdmissionRatePerSec", queue.MinAdmissionRate, queue.MaxAdmissionRate},
		{"maxAdmissionRatePerSec", queue.MinAdmissionRate, queue.MaxAdmissionRate},
		{"targetOrderLatencyMs", queue.MinTargetOrderLatencyMs, queue.MaxTargetOrderLatencyMs},
	}
	for _, b := range bounds {
		p := knobs[b.name]
		if p.Minimum == nil || p.Maximum == nil {
			t.Errorf("%s: no documented range", b.name)
		} else if *p.Minimum != b.min || *p.Maximum != b.max {
			t.Errorf("%s: documented range [%v, %v], validated [%v, %v]", b.name, *p.Minimum, *p.Maximum, b.min, b.max)
		}
	}
	if mode := knobs["admissionMode"].Enum; !slices.Equal(mode, []string{string(queue.AdmissionFixed), string(queue.AdmissionAdaptive)}) {
		t.Errorf("admissionMode enum %v", mode)
	}
	if mode := knobs["failMode"].Enum; !slices.Equal(mode, []string{string(queue.FailClosed), string(queue.FailOpen)}) {
		t.Errorf("failMode enum %v", mode)
	}
	if states := doc.Components.Schemas["Standing"].Properties["state"].Enum; !slices.Contains(states, string(queue.Bypass)) {
		t.Errorf("Standing state enum %v has no %s", states, queue.Bypass)
	}

	admin := doc.Components.Schemas["QueueAdmin"].AllOf
	if len(admin) != 2 {
		t.Fatalf("QueueAdmin allOf has %d parts, want 2", len(admin))
	}
	view := admin[1].Properties
	if _, ok := view["effectiveRatePerSec"]; !ok {
		t.Error("QueueAdmin has no effectiveRatePerSec")
	}
	reason := regexp.MustCompile(view["rateReason"].Pattern)
	decisions := []queue.RateDecision{queue.RateIncrease, queue.RateAtMax, queue.RateDecrease, queue.RateAtMin,
		queue.RateCooldown, queue.RateHoldStale, queue.RateHoldNoNews}
	for _, d := range decisions {
		if r := string(d) + ": some words"; !reason.MatchString(r) {
			t.Errorf("rateReason pattern %q refuses %q", reason, r)
		}
	}
	if reason.MatchString("SLOWER: some words") {
		t.Errorf("rateReason pattern %q takes an unknown decision", reason)
	}
}
