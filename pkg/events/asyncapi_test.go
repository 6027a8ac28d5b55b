package events_test

import (
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"

	"github.com/waitingroom/waitingroom/pkg/events"
	v1 "github.com/waitingroom/waitingroom/pkg/events/waitingroomv1"
)

// asyncAPI is proto/asyncapi.yaml, parsed.
func asyncAPI(t *testing.T) map[string]any {
	t.Helper()
	b, err := os.ReadFile(protoRoot + "/asyncapi.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var doc map[string]any
	if err := yaml.Unmarshal(b, &doc); err != nil {
		t.Fatalf("asyncapi.yaml: %v", err)
	}
	return doc
}

// at walks v by keys; nil when a key is missing or v is not a mapping.
func at(v any, keys ...string) any {
	for _, k := range keys {
		m, ok := v.(map[string]any)
		if !ok {
			return nil
		}
		v = m[k]
	}
	return v
}

// str is at(v, keys...) as a string, "" when it is none.
func str(v any, keys ...string) string {
	s, _ := at(v, keys...).(string)
	return s
}

// resolve follows a local $ref ("#/components/messages/TokenIssued", a JSON
// pointer) in doc.
func resolve(doc map[string]any, ref string) (any, error) {
	path, ok := strings.CutPrefix(ref, "#/")
	if !ok {
		return nil, fmt.Errorf("$ref %q is not local", ref)
	}
	var keys []string
	for _, k := range strings.Split(path, "/") {
		keys = append(keys, strings.NewReplacer("~1", "/", "~0", "~").Replace(k))
	}
	v := at(doc, keys...)
	if v == nil {
		return nil, fmt.Errorf("$ref %q resolves to nothing", ref)
	}
	return v, nil
}

// TestAsyncAPIRefsResolve: every $ref of the document names something,
// in it or (the protobuf schema) a file next to it.
func TestAsyncAPIRefsResolve(t *testing.T) {
	doc := asyncAPI(t)
	n := 0
	var walk func(v any)
	walk = func(v any) {
		switch v := v.(type) {
		case map[string]any:
			for k, e := range v {
				if ref, ok := e.(string); k == "$ref" && ok {
					n++
					if strings.HasPrefix(ref, "#") {
						if _, err := resolve(doc, ref); err != nil {
							t.Error(err)
						}
					} else if _, err := os.Stat(filepath.Join(protoRoot, ref)); err != nil {
						t.Errorf("$ref %q: %v", ref, err)
					}
				}
				walk(e)
			}
		case []any:
			for _, e := range v {
				walk(e)
			}
		}
	}
	walk(doc)
	if n < 50 {
		t.Errorf("%d $refs found, expected every channel, operation and message to use some: the walk is wrong", n)
	}
}

// TestAsyncAPIChannelsAreTheRoutingKeys: the channel addresses are exactly
// the routing keys of the registry (events.RoutingKeys), each carrying the
// one message type published with it, and every message type is listed once.
func TestAsyncAPIChannelsAreTheRoutingKeys(t *testing.T) {
	doc := asyncAPI(t)
	if v := str(doc, "asyncapi"); v != "3.0.0" {
		t.Errorf("asyncapi: %q, want 3.0.0", v)
	}
	channels, _ := at(doc, "channels").(map[string]any)
	var addresses []string
	typeOf := map[string]string{} // channel id -> message type
	for id, ch := range channels {
		addr := str(ch, "address")
		addresses = append(addresses, addr)
		msgs, _ := at(ch, "messages").(map[string]any)
		if len(msgs) != 1 {
			t.Errorf("channel %s (%s) has %d messages, want 1 (one type per routing key)", id, addr, len(msgs))
			continue
		}
		for _, ref := range msgs {
			m, err := resolve(doc, str(ref, "$ref"))
			if err != nil {
				t.Errorf("channel %s: %v", id, err)
				continue
			}
			typ := str(m, "bindings", "amqp", "messageType")
			typeOf[id] = typ
			if str(m, "title") != typ {
				t.Errorf("message %s: title %q, want its type %q", typ, str(m, "title"), typ)
			}
			msg, err := events.Decode(typ, nil)
			if err != nil {
				t.Errorf("channel %s: message type %q: %v", id, typ, err)
				continue
			}
			if key, _ := events.RoutingKey(msg); key != addr {
				t.Errorf("channel %s carries %s at address %q; the code publishes it with %q", id, typ, addr, key)
			}
		}
		b, err := resolve(doc, str(ch, "bindings", "$ref"))
		if err != nil {
			t.Errorf("channel %s bindings: %v", id, err)
			continue
		}
		if is, ex := str(b, "amqp", "is"), str(b, "amqp", "exchange", "name"); is != "routingKey" || ex != events.ExchangeName ||
			str(b, "amqp", "exchange", "type") != "topic" || at(b, "amqp", "exchange", "durable") != true {
			t.Errorf("channel %s: binding is %q on exchange %q, want a routingKey on the durable topic exchange %s", id, is, ex, events.ExchangeName)
		}
	}
	slices.Sort(addresses)
	if want := events.RoutingKeys(); !slices.Equal(addresses, want) {
		t.Errorf("channel addresses %q, want exactly the routing keys the code publishes %q", addresses, want)
	}
	if !slices.Contains(addresses, "order.health") {
		t.Error("asyncapi.yaml does not list order.health")
	}

	// Every message type once, in channels and in components.
	var types []string
	msgs := v1.File_waitingroom_v1_events_proto.Messages()
	for i := range msgs.Len() {
		types = append(types, string(msgs.Get(i).FullName()))
	}
	slices.Sort(types)
	inChannels := slices.Sorted(maps.Values(typeOf))
	if !slices.Equal(inChannels, types) {
		t.Errorf("channels carry %q, want each of %q once", inChannels, types)
	}
	var inComponents []string
	components, _ := at(doc, "components", "messages").(map[string]any)
	for name, m := range components {
		inComponents = append(inComponents, str(m, "bindings", "amqp", "messageType"))
		if want := "waitingroom.v1." + name; str(m, "bindings", "amqp", "messageType") != want {
			t.Errorf("components.messages.%s has messageType %q, want %q", name, str(m, "bindings", "amqp", "messageType"), want)
		}
	}
	slices.Sort(inComponents)
	if !slices.Equal(inComponents, types) {
		t.Errorf("components.messages are %q, want %q", inComponents, types)
	}

	// Every channel has the operation that publishes it, and an operation's
	// messages are its channel's.
	sent := map[string]int{}
	operations, _ := at(doc, "operations").(map[string]any)
	for id, op := range operations {
		ch, ok := strings.CutPrefix(str(op, "channel", "$ref"), "#/channels/")
		if _, exists := channels[ch]; !ok || !exists {
			t.Errorf("operation %s: channel %q is not one of the channels", id, str(op, "channel", "$ref"))
			continue
		}
		if str(op, "action") == "send" {
			sent[ch]++
		}
		list, _ := at(op, "messages").([]any)
		for _, m := range list {
			if ref := str(m, "$ref"); !strings.HasPrefix(ref, "#/channels/"+ch+"/messages/") {
				t.Errorf("operation %s on %s names message %q of another channel", id, ch, ref)
			}
		}
	}
	for id := range channels {
		if sent[id] != 1 {
			t.Errorf("channel %s has %d send operations, want 1 (who publishes it)", id, sent[id])
		}
	}
}

// TestAsyncAPIHeaders: every message has the event trait, whose headers are
// the CloudEvents binding (required) and the W3C trace context, plain and as
// the CloudEvents distributed-tracing extension (optional: present when the
// producer had a trace).
func TestAsyncAPIHeaders(t *testing.T) {
	doc := asyncAPI(t)
	const trait = "#/components/messageTraits/event"
	components, _ := at(doc, "components", "messages").(map[string]any)
	for name, m := range components {
		traits, _ := at(m, "traits").([]any)
		if len(traits) != 1 || str(traits[0], "$ref") != trait {
			t.Errorf("message %s: traits %v, want [%s]", name, traits, trait)
		}
	}
	tr, err := resolve(doc, trait)
	if err != nil {
		t.Fatal(err)
	}
	if ct := str(tr, "contentType"); ct != "application/protobuf" {
		t.Errorf("contentType %q", ct)
	}
	headers, err := resolve(doc, str(tr, "headers", "$ref"))
	if err != nil {
		t.Fatal(err)
	}
	// The header schema: its properties and required ones, through allOf.
	props := map[string]any{}
	var required []string
	parts, _ := at(headers, "allOf").([]any)
	for _, p := range append(parts, headers) {
		if ref := str(p, "$ref"); ref != "" {
			if p, err = resolve(doc, ref); err != nil {
				t.Fatal(err)
			}
		}
		ps, _ := at(p, "properties").(map[string]any)
		maps.Copy(props, ps)
		rs, _ := at(p, "required").([]any)
		for _, r := range rs {
			required = append(required, r.(string))
		}
	}
	slices.Sort(required)
	if want := []string{"cloudEvents:id", "cloudEvents:source", "cloudEvents:specversion", "cloudEvents:time", "cloudEvents:type"}; !slices.Equal(required, want) {
		t.Errorf("required headers %q, want %q", required, want)
	}
	schema := func(name string) any { // a property's schema, its $ref followed
		p := props[name]
		if ref := str(p, "$ref"); ref != "" {
			if p, err = resolve(doc, ref); err != nil {
				t.Errorf("header %s: %v", name, err)
			}
		}
		return p
	}
	for _, pair := range [][2]string{{"traceparent", "cloudEvents:traceparent"}, {"tracestate", "cloudEvents:tracestate"}} {
		plain, ce := schema(pair[0]), schema(pair[1])
		if str(plain, "type") != "string" {
			t.Errorf("header %s: %v, want a string schema", pair[0], plain)
		}
		if fmt.Sprint(plain) != fmt.Sprint(ce) {
			t.Errorf("header %s is %v, want the same schema as %s", pair[1], ce, pair[0])
		}
	}
	re, err := regexp.Compile(str(schema("traceparent"), "pattern"))
	if err != nil {
		t.Fatalf("traceparent pattern: %v", err)
	}
	examples, _ := at(schema("traceparent"), "examples").([]any)
	if len(examples) == 0 {
		t.Error("traceparent has no example")
	}
	for _, e := range examples {
		if s, _ := e.(string); !re.MatchString(s) {
			t.Errorf("traceparent example %v does not match its pattern %s", e, re)
		}
	}
	for _, bad := range []string{"", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7", "00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01"} {
		if re.MatchString(bad) {
			t.Errorf("traceparent pattern accepts %q", bad)
		}
	}
}

// TestRegistryCoversEveryMessage: every message of events.proto has a
// routing key of its own, and RoutingKeys lists each once.
func TestRegistryCoversEveryMessage(t *testing.T) {
	keys := events.RoutingKeys()
	msgs := v1.File_waitingroom_v1_events_proto.Messages()
	if len(keys) != msgs.Len() || len(slices.Compact(slices.Clone(keys))) != len(keys) {
		t.Errorf("RoutingKeys() = %q: want %d distinct keys, one per message of events.proto", keys, msgs.Len())
	}
	for i := range msgs.Len() {
		name := string(msgs.Get(i).FullName())
		m, err := events.Decode(name, nil)
		if err != nil {
			t.Errorf("%s is not registered: %v", name, err)
			continue
		}
		if key, _ := events.RoutingKey(m); !slices.Contains(keys, key) {
			t.Errorf("%s: routing key %q is not in RoutingKeys()", name, key)
		}
	}
}
