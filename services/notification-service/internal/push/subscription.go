package push

import (
	"crypto/ecdh"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"net"
	"net/url"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Limits of a subscription request.
const (
	// MaxEndpointBytes bounds a push endpoint URL (the push services' are
	// a few hundred bytes).
	MaxEndpointBytes = 2048
	// MaxTitleRunes and MaxBodyRunes bound the notification's words, which
	// the page sends in the person's language and the queue's wording.
	MaxTitleRunes = 100
	MaxBodyRunes  = 300
)

// Request is what the page sends to subscribe: the browser's
// PushSubscription and the words of the notification, in its language.
type Request struct {
	Subscription Subscription `json:"subscription"`
	Title        string       `json:"title"`
	Body         string       `json:"body"`
	Lang         string       `json:"lang"`
}

// Subscription is a browser's PushSubscription (its toJSON()).
type Subscription struct {
	Endpoint string `json:"endpoint"`
	Keys     Keys   `json:"keys"`
	// ExpirationTime is the browser's, often null; it is not used.
	ExpirationTime *float64 `json:"expirationTime,omitempty"`
}

// Keys are the subscription's P-256 public key and auth secret, base64url.
type Keys struct {
	P256dh string `json:"p256dh"`
	Auth   string `json:"auth"`
}

// FieldError is one refused field of a request.
type FieldError struct{ Field, Message string }

// InvalidError is a refused request: every bad field, named.
type InvalidError struct{ Fields []FieldError }

func (e *InvalidError) Error() string {
	parts := make([]string, len(e.Fields))
	for i, f := range e.Fields {
		parts[i] = f.Field + ": " + f.Message
	}
	return "push: invalid subscription: " + strings.Join(parts, "; ")
}

// Endpoints says which push endpoints the service may send to: the server
// POSTs to a URL the browser gave, so only the push services' hosts are
// allowed (no request to the shop's own network on a stranger's say).
type Endpoints struct {
	// Hosts are host names, or "*.suffix" for any host under suffix; an
	// endpoint must be https on port 443 at one of them.
	Hosts []string
	// Loopback also allows http to 127.0.0.1, ::1 and localhost on any
	// port: for tests and a developer's machine, never production.
	Loopback bool
}

// Check reports why endpoint may not be sent to, or nil.
func (e Endpoints) Check(endpoint string) error {
	if len(endpoint) > MaxEndpointBytes {
		return fmt.Errorf("longer than %d bytes", MaxEndpointBytes)
	}
	u, err := url.Parse(endpoint)
	if err != nil || u.Host == "" || u.User != nil || u.Fragment != "" {
		return errors.New("not an absolute URL without user info or fragment")
	}
	host := strings.ToLower(u.Hostname())
	if e.Loopback && isLoopback(host) && (u.Scheme == "http" || u.Scheme == "https") {
		return nil
	}
	if u.Scheme != "https" || (u.Port() != "" && u.Port() != "443") {
		return errors.New("not an https URL on port 443")
	}
	for _, h := range e.Hosts {
		h = strings.ToLower(h)
		if suffix, ok := strings.CutPrefix(h, "*."); ok {
			if strings.HasSuffix(host, "."+suffix) {
				return nil
			}
		} else if host == h {
			return nil
		}
	}
	return fmt.Errorf("host %q is not a push service this waiting room sends to (PUSH_ENDPOINT_HOSTS)", host)
}

func isLoopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// check validates r against e and returns its id: a digest of the
// endpoint, the same for the same browser however often it subscribes.
func (r *Request) check(e Endpoints) (string, error) {
	var bad []FieldError
	add := func(field, msg string) { bad = append(bad, FieldError{field, msg}) }
	if err := e.Check(r.Subscription.Endpoint); err != nil {
		add("subscription.endpoint", err.Error())
	}
	if k, err := decodeKey(r.Subscription.Keys.P256dh); err != nil || len(k) != 65 {
		add("subscription.keys.p256dh", "not a base64url uncompressed P-256 public key (65 bytes)")
	} else if _, err := ecdh.P256().NewPublicKey(k); err != nil {
		add("subscription.keys.p256dh", "not a point on P-256")
	}
	if k, err := decodeKey(r.Subscription.Keys.Auth); err != nil || len(k) != 16 {
		add("subscription.keys.auth", "not a base64url 16-byte auth secret")
	}
	if msg := words(r.Title, MaxTitleRunes, false); msg != "" {
		add("title", msg)
	}
	if msg := words(r.Body, MaxBodyRunes, true); msg != "" {
		add("body", msg)
	}
	if !langTag(r.Lang) {
		add("lang", "not a language tag such as en or pt-BR")
	}
	if bad != nil {
		return "", &InvalidError{Fields: bad}
	}
	sum := sha256.Sum256([]byte(r.Subscription.Endpoint))
	return base64.RawURLEncoding.EncodeToString(sum[:16]), nil
}

// words says what is wrong with a notification's text, or "".
func words(s string, most int, empty bool) string {
	switch {
	case !utf8.ValidString(s):
		return "not UTF-8"
	case s == "" && !empty:
		return "empty"
	case utf8.RuneCountInString(s) > most:
		return fmt.Sprintf("longer than %d characters", most)
	case strings.ContainsFunc(s, unicode.IsControl):
		return "holds control characters"
	}
	return ""
}

// langTag accepts a BCP 47-like tag: letters, digits and hyphens, a
// language of two or three letters first; "" is English.
func langTag(s string) bool {
	if s == "" {
		return true
	}
	if len(s) > 35 {
		return false
	}
	for i, part := range strings.Split(s, "-") {
		if part == "" || len(part) > 8 || (i == 0 && (len(part) < 2 || len(part) > 3)) {
			return false
		}
		for _, c := range part {
			if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || i > 0 && '0' <= c && c <= '9') {
				return false
			}
		}
	}
	return true
}

// decodeKey reads base64url, padded or not (browsers send it unpadded).
func decodeKey(s string) ([]byte, error) {
	return base64.RawURLEncoding.DecodeString(strings.TrimRight(s, "="))
}
