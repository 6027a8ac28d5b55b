package redisstore

import (
	"reflect"
	"strings"
	"testing"

	"github.com/waitingroom/waitingroom/pkg/queue"
)

// everyKey calls each exported method of k that names a key (all of them
// take no argument or one string: a user or a challenge id), so a key
// added later is covered without editing this test.
func everyKey(k Keys, arg string) map[string]string {
	out := map[string]string{}
	v := reflect.ValueOf(k)
	for i := 0; i < v.NumMethod(); i++ {
		m, name := v.Method(i), v.Type().Method(i).Name
		if name == "Prefix" || m.Type().NumOut() != 1 || m.Type().Out(0).Kind() != reflect.String {
			continue
		}
		switch m.Type().NumIn() {
		case 0:
			out[name] = m.Call(nil)[0].String()
		case 1:
			if m.Type().In(0).Kind() == reflect.String {
				out[name] = m.Call([]reflect.Value{reflect.ValueOf(arg)})[0].String()
			}
		}
	}
	return out
}

// FuzzKeysFor: the hash-tag property the Lua scripts depend on. A valid
// queue id never holds a brace, its hash tag is exactly the id, and every
// key of the queue, whatever user or challenge id ends it (even one with
// braces), lands in the id's one cluster slot.
func FuzzKeysFor(f *testing.F) {
	for _, s := range [][2]string{
		{"sale", "alice"}, {"sale-2026", "user@example.com"}, {"0", "{other}"}, {strings.Repeat("q", 64), "}"},
		{"a", "0123456789abcdef0123456789abcdef"}, {"{sale}", "alice"}, {"sa}le", "x"}, {"", ""}, {"sale", "{"},
	} {
		f.Add(s[0], s[1])
	}
	if n := len(everyKey(KeysFor("q"), "u")); n < 13 {
		f.Fatalf("found %d key methods on Keys, want at least 13", n)
	}
	f.Fuzz(func(t *testing.T, q, arg string) {
		if !queue.ValidID(q) {
			return
		}
		if strings.ContainsAny(q, "{}") {
			t.Fatalf("valid queue id %q holds a brace", q)
		}
		k := KeysFor(q)
		want := crc16([]byte(q)) % 16384
		for name, key := range everyKey(k, arg) {
			if !strings.HasPrefix(key, k.Prefix()) {
				t.Fatalf("%s(%q) of queue %q = %q, outside the queue's prefix %q", name, arg, q, key, k.Prefix())
			}
			open := strings.IndexByte(key, '{')
			end := strings.IndexByte(key[open+1:], '}')
			if tag := key[open+1 : open+1+end]; tag != q {
				t.Fatalf("%s(%q) = %q: hash tag %q, want the queue id %q", name, arg, key, tag, q)
			}
			if got := slot(key); got != want {
				t.Fatalf("%s(%q) = %q in slot %d, queue %q is in %d", name, arg, key, got, q, want)
			}
		}
	})
}
