package httpserver

import (
	"strings"
	"testing"
)

func TestDecodeStrictTakesTheContractsNamesOnly(t *testing.T) {
	type body struct {
		QueueID  string  `json:"queueId"`
		Quantity int     `json:"quantity"`
		Note     *string `json:"note,omitempty"`
		Skip     string  `json:"-"`
	}
	for _, tc := range []struct {
		in, err string
		want    body
	}{
		{in: `{"queueId":"sale","quantity":2}`, want: body{QueueID: "sale", Quantity: 2}},
		{in: `{"quantity":1}`, want: body{Quantity: 1}},
		{in: `{"QUEUEID":"sale","quantity":2}`, err: `unknown field "QUEUEID"`},
		{in: `{"queueid":"sale"}`, err: `unknown field "queueid"`},
		{in: `{"Quantity":2}`, err: `unknown field "Quantity"`},
		{in: `{"Skip":"x"}`, err: `unknown field "Skip"`},
		{in: `{"other":1}`, err: `unknown field "other"`},
		{in: `{"quantity":"2"}`, err: "cannot unmarshal"},
		{in: `{"quantity":1} {}`, err: "invalid character"},
		{in: `null`, err: "must be a JSON object"},
		{in: `[]`, err: "cannot unmarshal"},
		{in: ``, err: "unexpected end"},
	} {
		var got body
		err := DecodeStrict([]byte(tc.in), &got)
		switch {
		case tc.err == "" && err != nil:
			t.Errorf("%s: %v", tc.in, err)
		case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
			t.Errorf("%s: error %v, want one containing %q", tc.in, err, tc.err)
		case tc.err == "" && got != tc.want:
			t.Errorf("%s: %+v, want %+v", tc.in, got, tc.want)
		}
	}
}
