package web

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"
)

// A queue's own wording: an operator replaces any of the page's messages,
// per language, for one queue (PUT /admin/v1/queues/{queueId}/texts/{lang}).
// Limits: a message form is at most MaxTextRunes long, one language's set
// at most MaxTextsBytes.
const (
	MaxTextRunes  = 500
	MaxTextsBytes = 32 << 10
)

// TextsError lists every reason a queue's wording was refused, one per
// message key (or "" for the whole set).
type TextsError struct{ Fields map[string]string }

func (e *TextsError) Error() string {
	keys := make([]string, 0, len(e.Fields))
	for k := range e.Fields {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	var b strings.Builder
	for i, k := range keys {
		if i > 0 {
			b.WriteString("; ")
		}
		fmt.Fprintf(&b, "%s: %s", k, e.Fields[k])
	}
	return b.String()
}

// Speaks reports whether the page has a translation file for lang.
func (h *Handler) Speaks(lang string) bool { return h.codes[lang] }

// CheckTexts checks a queue's wording of language lang (a JSON object of
// message key to message) against the page's English messages: every key
// is one of them, each message has their shape (a string, or plural forms
// by Intl category with "other") and exactly their {slots}, each form is
// at most MaxTextRunes of printable text. It returns the set re-encoded
// (keys sorted), or a *TextsError.
func (h *Handler) CheckTexts(lang string, raw []byte) ([]byte, error) {
	if !h.codes[lang] {
		return nil, &TextsError{Fields: map[string]string{"": fmt.Sprintf("the page speaks no language %q", lang)}}
	}
	if len(raw) > MaxTextsBytes {
		return nil, &TextsError{Fields: map[string]string{"": fmt.Sprintf("at most %d bytes", MaxTextsBytes)}}
	}
	var msgs map[string]json.RawMessage
	if err := json.Unmarshal(raw, &msgs); err != nil || msgs == nil {
		return nil, &TextsError{Fields: map[string]string{"": "must be a JSON object of message key to message"}}
	}
	bad := map[string]string{}
	out := map[string]message{}
	for key, rawMsg := range msgs {
		want, ok := h.en[key]
		if !ok {
			bad[key] = "is not one of the page's messages"
			continue
		}
		var got message
		if err := json.Unmarshal(rawMsg, &got); err != nil {
			bad[key] = err.Error()
			continue
		}
		if got.plural != want.plural {
			bad[key] = map[bool]string{true: "must be an object of plural forms, as the page's is", false: "must be a string, as the page's is"}[want.plural]
			continue
		}
		for cat, g := range badSlots(want, got) {
			bad[key] = fmt.Sprintf("form %s has the slots %v, want %v", cat, g, slots(want.forms["other"]))
		}
		for cat, form := range got.forms {
			if n := utf8.RuneCountInString(form); n > MaxTextRunes || strings.TrimSpace(form) == "" {
				bad[key] = fmt.Sprintf("form %s must be 1 to %d characters, not %d", cat, MaxTextRunes, n)
			} else if i := strings.IndexFunc(form, func(r rune) bool { return unicode.IsControl(r) || r == utf8.RuneError }); i >= 0 {
				bad[key] = fmt.Sprintf("form %s holds a control character at byte %d", cat, i)
			}
		}
		out[key] = got
	}
	if len(bad) > 0 {
		return nil, &TextsError{Fields: bad}
	}
	return json.Marshal(out)
}

// MarshalJSON writes a message as the translation files hold it.
func (m message) MarshalJSON() ([]byte, error) {
	if !m.plural {
		return json.Marshal(m.forms["other"])
	}
	return json.Marshal(m.forms)
}
