package broker_test

import (
	"errors"
	"fmt"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/waitingroom/waitingroom/pkg/broker"
)

const stringValueType = "google.protobuf.StringValue"

// checkMessage compares what arrived with the event that was published.
func checkMessage(want broker.Event, key, id, typ, ct string, ts time.Time, h map[string]any, body []byte) error {
	var errs []error
	if key != want.RoutingKey || id != want.ID || typ != stringValueType || ct != "application/protobuf" {
		errs = append(errs, fmt.Errorf("properties key=%q id=%q type=%q content_type=%q", key, id, typ, ct))
	}
	if ts.Unix() != want.Time.Unix() { // AMQP timestamps have whole seconds
		errs = append(errs, fmt.Errorf("timestamp %v, want %v", ts, want.Time))
	}
	wantH := map[string]any{
		"cloudEvents:id":          want.ID,
		"cloudEvents:source":      testSource,
		"cloudEvents:type":        stringValueType,
		"cloudEvents:specversion": "1.0",
		"cloudEvents:time":        want.Time.UTC().Format(time.RFC3339Nano),
	}
	for k, v := range wantH {
		if h[k] != v {
			errs = append(errs, fmt.Errorf("header %s = %v, want %v", k, h[k], v))
		}
	}
	if len(h) != len(wantH) {
		errs = append(errs, fmt.Errorf("%d headers, want %d: %v", len(h), len(wantH), h))
	}
	if at, err := time.Parse(time.RFC3339Nano, fmt.Sprint(h["cloudEvents:time"])); err != nil || !at.Equal(want.Time) {
		errs = append(errs, fmt.Errorf("cloudEvents:time parses to %v, %v", at, err))
	}
	var m wrapperspb.StringValue
	if err := proto.Unmarshal(body, &m); err != nil || m.GetValue() != want.ID {
		errs = append(errs, fmt.Errorf("body decodes to %q, %v", m.GetValue(), err))
	}
	return errors.Join(errs...)
}

func unwrapAll(err error) []error {
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		return j.Unwrap()
	}
	if err == nil {
		return nil
	}
	return []error{err}
}
