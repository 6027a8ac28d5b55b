package queue

import (
	"reflect"
	"strings"
	"testing"
)

func TestDecodePatchListsEveryBadField(t *testing.T) {
	body := `{"state":"SHUT","admissionRatePerSec":"fast","maxActive":1.5,"bogus":1,"maxQueueSize":null,"tokenTtlSeconds":60}`
	p, errs := DecodePatch([]byte(body))
	got := map[string]bool{}
	for _, e := range errs {
		got[e.Field] = true
	}
	want := map[string]bool{"state": true, "admissionRatePerSec": true, "maxActive": true, "bogus": true, "maxQueueSize": true}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("bad fields = %v, want %v", got, want)
	}
	if p.TokenTTLSeconds == nil || *p.TokenTTLSeconds != 60 {
		t.Fatalf("the good field tokenTtlSeconds was not decoded: %v", p.TokenTTLSeconds)
	}
}

func TestDecodePatchRejectsNonObjects(t *testing.T) {
	for _, body := range []string{"", "  ", "null", "[]", `"x"`, "{", `{"state":"OPEN"} trailing`, "42"} {
		if _, errs := DecodePatch([]byte(body)); len(errs) != 1 || errs[0].Field != "" {
			t.Errorf("DecodePatch(%q) = %v, want one body-level error", body, errs)
		}
	}
}

func TestPatchApplyKeepsOmittedFields(t *testing.T) {
	p, errs := DecodePatch([]byte(`{"admissionRatePerSec":50,"state":"PAUSED","maxOrdersPerUser":2}`))
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	got := p.Apply(DefaultConfig())
	want := DefaultConfig()
	want.AdmissionRatePerSec, want.State, want.MaxOrdersPerUser = 50, Paused, 2
	if got != want {
		t.Fatalf("Apply = %+v, want %+v", got, want)
	}
}

func TestValidateBounds(t *testing.T) {
	tests := []struct {
		name  string
		mut   func(*Config)
		field string
	}{
		{"rate zero", func(c *Config) { c.AdmissionRatePerSec = 0 }, "admissionRatePerSec"},
		{"rate absurd", func(c *Config) { c.AdmissionRatePerSec = 1e9 }, "admissionRatePerSec"},
		{"negative max active", func(c *Config) { c.MaxActive = -1 }, "maxActive"},
		{"empty line", func(c *Config) { c.MaxQueueSize = 0 }, "maxQueueSize"},
		{"absurd line", func(c *Config) { c.MaxQueueSize = 1 << 40 }, "maxQueueSize"},
		{"no wait", func(c *Config) { c.MaxWaitSeconds = 0 }, "maxWaitSeconds"},
		{"token too short", func(c *Config) { c.TokenTTLSeconds = 0 }, "tokenTtlSeconds"},
		{"negative spread", func(c *Config) { c.ActivationSpreadMs = -5 }, "activationSpreadMs"},
		{"spread longer than half the token", func(c *Config) { c.TokenTTLSeconds, c.ActivationSpreadMs = 20, 10_000 }, "activationSpreadMs"},
		{"line of nobody", func(c *Config) { c.AdmissionRatePerSec, c.MaxWaitSeconds = 0.01, 10 }, "maxWaitSeconds"},
		{"unknown state", func(c *Config) { c.State = "open" }, "state"},
		{"negative orders per user", func(c *Config) { c.MaxOrdersPerUser = -1 }, "maxOrdersPerUser"},
		{"absurd orders per user", func(c *Config) { c.MaxOrdersPerUser = MaxMaxOrdersPerUser + 1 }, "maxOrdersPerUser"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := DefaultConfig()
			tt.mut(&c)
			errs := c.Validate()
			if len(errs) != 1 || errs[0].Field != tt.field {
				t.Fatalf("Validate = %v, want exactly one error on %s", errs, tt.field)
			}
		})
	}
	if errs := DefaultConfig().Validate(); len(errs) != 0 {
		t.Fatalf("defaults invalid: %v", errs)
	}
}

// FuzzDecodePatch: any body either decodes or reports field errors; it never
// panics, and a patch that decodes cleanly and validates really is in bounds.
func FuzzDecodePatch(f *testing.F) {
	for _, s := range []string{
		`{"state":"OPEN","admissionRatePerSec":175,"maxActive":0,"maxQueueSize":100000,"maxWaitSeconds":600,"tokenTtlSeconds":300,"activationSpreadMs":2000}`,
		`{"admissionRatePerSec":1e400}`, `{"maxActive":-1}`, `{"state":null}`, `{}`, `[]`, `{"a":{"b":[1,2]}}`,
		`{"maxQueueSize":9223372036854775808}`, "\xff\xfe", `{"state":"OPEN","state":"PAUSED"}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		p, errs := DecodePatch(data)
		for _, e := range errs {
			if e.Message == "" {
				t.Fatalf("field error without a message: %+v", e)
			}
			if strings.ContainsAny(e.Field, "\x00") {
				t.Fatalf("field name with NUL: %q", e.Field)
			}
		}
		if len(errs) > 0 {
			return
		}
		c := p.Apply(DefaultConfig())
		if len(c.Validate()) == 0 {
			if c.AdmissionRatePerSec < MinAdmissionRate || c.AdmissionRatePerSec > MaxAdmissionRate ||
				c.MaxQueueSize < 1 || c.MaxQueueSize > MaxMaxQueueSize || c.Capacity() < 1 {
				t.Fatalf("valid config out of bounds: %+v", c)
			}
		}
	})
}
