package httpapi_test

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"sort"
	"strings"
	"testing"
)

func TestBadInputGetsAClearFourHundredAndChangesNothing(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	q := h.newQueue(map[string]any{"admissionRatePerSec": 50})
	admin, user := h.admin(), h.token("u1", "")
	big := `{"state":"OPEN","pad":"` + strings.Repeat("x", 70<<10) + `"}`

	tests := []struct {
		name, method, path, token string
		body                      any
		contentType               string
		status                    int
		typ                       string
		fields                    []string
	}{
		{"bad queue id on enter", http.MethodPost, "/api/v1/queues/Bad_Queue/enter", user, nil, "", 400, "invalid-queue-id", nil},
		{"bad queue id on position", http.MethodGet, "/api/v1/queues/" + strings.Repeat("a", 65) + "/position", user, nil, "", 400, "invalid-queue-id", nil},
		{"bad queue id on admin", http.MethodPut, "/admin/v1/queues/-leading-dash", admin, `{}`, "", 400, "invalid-queue-id", nil},
		{"malformed JSON", http.MethodPut, "/admin/v1/queues/" + q, admin, `{"state":"OPEN",`, "", 400, "validation-failed", []string{""}},
		{"not an object", http.MethodPut, "/admin/v1/queues/" + q, admin, `[1,2]`, "", 400, "validation-failed", []string{""}},
		{"empty body", http.MethodPut, "/admin/v1/queues/" + q, admin, ``, "", 400, "validation-failed", []string{""}},
		{"unknown fields", http.MethodPut, "/admin/v1/queues/" + q, admin, `{"admissionRatePerSec":10,"color":"red","maxUsers":5}`, "", 400, "validation-failed", []string{"color", "maxUsers"}},
		{"wrong types", http.MethodPut, "/admin/v1/queues/" + q, admin, `{"admissionRatePerSec":"fast","maxQueueSize":1.5,"state":7}`, "", 400, "validation-failed", []string{"admissionRatePerSec", "maxQueueSize", "state"}},
		{"negative and absurd", http.MethodPut, "/admin/v1/queues/" + q, admin, `{"admissionRatePerSec":-1,"maxQueueSize":999999999999,"tokenTtlSeconds":0,"maxActive":-3}`, "", 400, "validation-failed", []string{"admissionRatePerSec", "maxActive", "maxQueueSize", "tokenTtlSeconds"}},
		{"null", http.MethodPut, "/admin/v1/queues/" + q, admin, `{"state":null}`, "", 400, "validation-failed", []string{"state"}},
		{"wrong content type", http.MethodPut, "/admin/v1/queues/" + q, admin, `state=OPEN`, "application/x-www-form-urlencoded", 415, "unsupported-media-type", nil},
		{"body over 64 KiB", http.MethodPut, "/admin/v1/queues/" + q, admin, big, "", 413, "body-too-large", nil},
		{"body over 64 KiB, no length", http.MethodPut, "/admin/v1/queues/" + q, admin, io.MultiReader(strings.NewReader(big)), "", 413, "body-too-large", nil},
		{"unknown route", http.MethodGet, "/api/v1/nothing-here", user, nil, "", 404, "not-found", nil},
		{"wrong method", http.MethodPatch, "/api/v1/queues/" + q + "/enter", user, nil, "", 405, "method-not-allowed", nil},
		{"unknown queue", http.MethodPost, "/api/v1/queues/none-" + q + "/enter", user, nil, "", 404, "queue-not-found", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var hdr []string
			if tt.contentType != "" {
				hdr = []string{"Content-Type", tt.contentType}
			}
			r := h.must(tt.method, tt.path, tt.token, tt.body, hdr...)
			p := r.problem(t, tt.status, tt.typ)
			if tt.fields != nil {
				var got []string
				for _, e := range p.Errors {
					if e.Message == "" {
						t.Errorf("field %q has no message", e.Field)
					}
					got = append(got, e.Field)
				}
				sort.Strings(got)
				if strings.Join(got, ",") != strings.Join(tt.fields, ",") {
					t.Fatalf("bad fields %v, want %v", got, tt.fields)
				}
			}
		})
	}

	// Nothing changed: the queue keeps its rate, nobody entered, and no
	// queue was created by a refused request.
	var v struct {
		AdmissionRatePerSec float64
		Waiting             int64
		State               string
	}
	r := h.must(http.MethodGet, "/admin/v1/queues/"+q, admin, nil)
	r.json(t, &v)
	if v.AdmissionRatePerSec != 50 || v.Waiting != 0 || v.State != "OPEN" {
		t.Fatalf("after bad input: %+v, want rate 50, 0 waiting, OPEN", v)
	}
	h.must(http.MethodGet, "/admin/v1/queues/-leading-dash", admin, nil).problem(t, 400, "invalid-queue-id")
}

// FuzzPutQueue: no body, however broken, gets a 5xx from the admin API or
// leaves a queue in a state that fails validation.
func FuzzPutQueue(f *testing.F) {
	for _, s := range []string{
		`{"state":"OPEN","admissionRatePerSec":175,"maxActive":0,"maxQueueSize":100000,"maxWaitSeconds":600,"tokenTtlSeconds":300,"activationSpreadMs":2000}`,
		`{"admissionRatePerSec":1e308}`, `{"maxActive":-1}`, `{"state":"PAUSED"}`, `{`, `null`, `{"a":1}`,
		`{"tokenTtlSeconds":10,"activationSpreadMs":9999}`, "\x00\xff", `{"maxQueueSize":1,"maxWaitSeconds":1,"admissionRatePerSec":0.01}`,
	} {
		f.Add([]byte(s))
	}
	h := newHarness(f)
	q := h.newQueue(nil)
	admin := h.admin()
	f.Fuzz(func(t *testing.T, body []byte) {
		req := httptest.NewRequest(http.MethodPut, "/admin/v1/queues/"+q, bytes.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+admin)
		req.Header.Set("Content-Type", "application/json")
		rec := httptest.NewRecorder()
		h.h.ServeHTTP(rec, req)
		switch rec.Code {
		case http.StatusOK, http.StatusCreated, http.StatusBadRequest:
		default:
			t.Fatalf("body %q: status %d %s", body, rec.Code, rec.Body)
		}
		cfg, _, err := h.store.Config(t.Context(), q)
		if err != nil {
			t.Fatalf("read back: %v", err)
		}
		if errs := cfg.Validate(); len(errs) > 0 {
			t.Fatalf("body %q left an invalid config %+v: %v", body, cfg, errs)
		}
	})
}
