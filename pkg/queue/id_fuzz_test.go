package queue

import (
	"encoding/json"
	"net/url"
	"strings"
	"testing"
)

// queueIDByHand is the documented queue id rule spelled out byte by byte,
// apart from the regular expression ValidID uses: 1 to 64 bytes of a-z, 0-9
// and '-', not starting with '-'.
func queueIDByHand(id string) bool {
	if len(id) < 1 || len(id) > 64 || id[0] == '-' {
		return false
	}
	for i := 0; i < len(id); i++ {
		c := id[i]
		if !('a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '-') {
			return false
		}
	}
	return true
}

// FuzzValidID: ValidID agrees with the rule spelled out by hand on every
// input, and an accepted id travels unchanged through every place the
// services put it: a URL path segment, a JSON string, the Redis hash tag
// (no braces), and lower-casing (one queue cannot be spelled two ways).
func FuzzValidID(f *testing.F) {
	for _, s := range []string{
		"sale", "sale-2026", "0", "a-", strings.Repeat("q", 64), strings.Repeat("q", 65),
		"", "-sale", "Sale", "sale_1", "sale\n", "sale\x00", "{sale}", "sa}le", "sale/../x",
		"s\u0430le", "ſale", "sale ", "%73ale", "\xff", "ᴀ",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, id string) {
		ok := ValidID(id)
		if ok != queueIDByHand(id) {
			t.Fatalf("ValidID(%q) = %v, the documented rule says %v", id, ok, !ok)
		}
		if !ok {
			return
		}
		if strings.ContainsAny(id, "{}") {
			t.Fatalf("valid queue id %q holds a brace: its Redis hash tag would not be the whole id", id)
		}
		if strings.ToLower(id) != id {
			t.Fatalf("valid queue id %q changes when lower-cased", id)
		}
		if esc := url.PathEscape(id); esc != id {
			t.Fatalf("valid queue id %q needs escaping in a path: %q", id, esc)
		}
		u, err := url.Parse("/api/v1/queues/" + id + "/enter")
		if err != nil || u.Path != "/api/v1/queues/"+id+"/enter" {
			t.Fatalf("valid queue id %q does not survive a URL: %v %v", id, u, err)
		}
		b, err := json.Marshal(id)
		if err != nil || string(b) != `"`+id+`"` {
			t.Fatalf("valid queue id %q is escaped in JSON: %s %v", id, b, err)
		}
	})
}

// userIDByHand is the documented user id rule spelled out byte by byte,
// apart from the regular expression ValidUserID uses: 1 to 128 bytes of
// A-Z, a-z, 0-9 and _ . : @ | - ('|' for Auth0's "auth0|..." subjects).
func userIDByHand(id string) bool {
	if len(id) < 1 || len(id) > 128 {
		return false
	}
	for i := 0; i < len(id); i++ {
		c := id[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || strings.IndexByte("_.:@|-", c) >= 0) {
			return false
		}
	}
	return true
}

// FuzzValidUserID: ValidUserID agrees with the rule spelled out by hand,
// and an accepted id holds nothing that would break the Redis keys it
// ends (braces, spaces, control bytes) or be escaped in JSON. pkg/auth's
// FuzzMintUserID checks that tokens carry exactly these ids.
func FuzzValidUserID(f *testing.F) {
	for _, s := range []string{
		"alice", "user@example.com", "a:b.c_d-e", "U", strings.Repeat("U", 128), strings.Repeat("U", 129),
		"", " ", "alice\n", "al ice", "{alice}", "a|b", "ålice", "alice\x00", "\xff", "a/b", "K",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, id string) {
		ok := ValidUserID(id)
		if ok != userIDByHand(id) {
			t.Fatalf("ValidUserID(%q) = %v, the documented rule says %v", id, ok, !ok)
		}
		if !ok {
			return
		}
		if strings.ContainsAny(id, "{} \t\r\n") {
			t.Fatalf("valid user id %q holds a character Redis keys or records split on", id)
		}
		if b, _ := json.Marshal(id); string(b) != `"`+id+`"` {
			t.Fatalf("valid user id %q is escaped in JSON: %s", id, b)
		}
	})
}
