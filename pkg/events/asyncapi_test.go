package events_test

import (
	"os"
	"regexp"
	"testing"

	"github.com/waitingroom/waitingroom/pkg/events"
	v1 "github.com/waitingroom/waitingroom/pkg/events/waitingroomv1"
)

// TestAsyncAPIDocument checks that proto/asyncapi.yaml names the exchange,
// every routing key as a channel address and every message type. It matches
// lines rather than parsing YAML, because no YAML module is a dependency of
// pkg. Check that it parses after editing it:
//
//	python3 -c 'import sys, yaml; yaml.safe_load(open(sys.argv[1]))' proto/asyncapi.yaml
func TestAsyncAPIDocument(t *testing.T) {
	b, err := os.ReadFile(protoRoot + "/asyncapi.yaml")
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)
	want := []string{
		`asyncapi: 3\.0\.0`,
		`name: ` + regexp.QuoteMeta(events.ExchangeName),
	}
	for _, key := range []string{
		events.RoutingKeyTokenIssued,
		events.RoutingKeyTokenRestored,
		events.RoutingKeyTokenExpired,
		events.RoutingKeyOrderCreated,
		events.RoutingKeyOrderFailed,
		events.RoutingKeyQueueStarted,
		events.RoutingKeyQueueDrawn,
		events.RoutingKeyOrderHealth,
	} {
		want = append(want, `address: `+regexp.QuoteMeta(key))
	}
	msgs := v1.File_waitingroom_v1_events_proto.Messages()
	for i := range msgs.Len() {
		want = append(want, `messageType: `+regexp.QuoteMeta(string(msgs.Get(i).FullName())))
	}
	for _, w := range want {
		if !regexp.MustCompile(`(?m)^\s*` + w + `\s*$`).MatchString(doc) {
			t.Errorf("asyncapi.yaml has no line %q", w)
		}
	}
}
