package broker

import (
	"reflect"
	"testing"
)

func TestSplitURLs(t *testing.T) {
	for _, tc := range []struct {
		name, list  string
		urls, addrs []string
	}{
		{"one", "amqp://guest:guest@localhost:5672/",
			[]string{"amqp://guest:guest@localhost:5672/"}, []string{"localhost:5672"}},
		{"default port", "amqp://u:p@rabbit/", []string{"amqp://u:p@rabbit/"}, []string{"rabbit:5672"}},
		{"three nodes", "amqp://u:p@r0:5672/,amqp://u:p@r1:5673/vh, AMQPS://u:p@r2/",
			[]string{"amqp://u:p@r0:5672/", "amqp://u:p@r1:5673/vh", "AMQPS://u:p@r2/"},
			[]string{"r0:5672", "r1:5673", "r2:5671"}},
		{"comma in a password", "amqp://u:a,b@r0:5672/,amqp://u:a,b@r1:5672/",
			[]string{"amqp://u:a,b@r0:5672/", "amqp://u:a,b@r1:5672/"}, []string{"r0:5672", "r1:5672"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			urls, addrs, err := splitURLs(tc.list)
			if err != nil || !reflect.DeepEqual(urls, tc.urls) || !reflect.DeepEqual(addrs, tc.addrs) {
				t.Errorf("splitURLs(%q) = %q, %q, %v; want %q, %q", tc.list, urls, addrs, err, tc.urls, tc.addrs)
			}
		})
	}
}

func TestSplitURLsRefuses(t *testing.T) {
	for _, list := range []string{"", "http://r0/", "amqp://r0/,http://r1/", "r0:5672,r1:5672"} {
		if urls, _, err := splitURLs(list); err == nil {
			t.Errorf("splitURLs(%q) = %q, want an error", list, urls)
		}
	}
}
