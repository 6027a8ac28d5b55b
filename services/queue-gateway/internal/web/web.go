// Package web serves the waiting-room page: one HTML document, its script,
// the Web Worker that solves an enter challenge, and its style sheet
// (embedded, no build step), and /config.json, which tells the page where
// the order-service and the notification-service are.
package web

import (
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"net/url"
	"path"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/waitingroom/waitingroom/pkg/problem"
	"github.com/waitingroom/waitingroom/pkg/queue"
)

// Defaults of the page's configuration: the services as `make run` starts them.
const (
	DefaultOrderServiceURL        = "http://localhost:8081"
	DefaultNotificationServiceURL = "http://localhost:8082"
	DefaultQueue                  = "demo"
)

// Config is what the page needs to know about its surroundings.
type Config struct {
	// OrderServiceURL and NotificationServiceURL are the services' public
	// base URLs as a browser reaches them (http or https, no query).
	OrderServiceURL        string
	NotificationServiceURL string
	// DefaultQueue is the queue `/` shows when no ?queue= is given.
	DefaultQueue string
	// DevMode lets the page mint a token at POST /api/v1/dev/token.
	DevMode bool
}

// withDefaults fills empty fields with the defaults.
func (c Config) withDefaults() Config {
	if c.OrderServiceURL == "" {
		c.OrderServiceURL = DefaultOrderServiceURL
	}
	if c.NotificationServiceURL == "" {
		c.NotificationServiceURL = DefaultNotificationServiceURL
	}
	if c.DefaultQueue == "" {
		c.DefaultQueue = DefaultQueue
	}
	return c
}

// Validate reports every bad field, naming its environment variable.
func (c Config) Validate() error {
	c = c.withDefaults()
	var errs []error
	if _, err := origin(c.OrderServiceURL); err != nil {
		errs = append(errs, fmt.Errorf("ORDER_SERVICE_PUBLIC_URL: %w", err))
	}
	if _, err := origin(c.NotificationServiceURL); err != nil {
		errs = append(errs, fmt.Errorf("NOTIFICATION_SERVICE_PUBLIC_URL: %w", err))
	}
	if !queue.ValidID(c.DefaultQueue) {
		errs = append(errs, fmt.Errorf("DEFAULT_QUEUE: %q is not a valid queue id", c.DefaultQueue))
	}
	return errors.Join(errs...)
}

// origin returns scheme://host[:port] of an absolute http(s) URL.
func origin(raw string) (string, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return "", err
	}
	if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil || u.RawQuery != "" || u.Fragment != "" {
		return "", fmt.Errorf("%q must be an absolute http(s) URL without credentials, query or fragment", raw)
	}
	// The host goes into a CSP header: nothing but host characters.
	if strings.ContainsAny(u.Host, " ;,'\"") {
		return "", fmt.Errorf("%q has an invalid host", raw)
	}
	return u.Scheme + "://" + u.Host, nil
}

//go:embed static console.html
var files embed.FS

// asset is one embedded file, ready to serve.
type asset struct {
	body  []byte
	ctype string
	etag  string
	hash  string // short content hash, the ?v= of its URL
	gz    []byte // body gzipped once at start, for clients that take it
}

// Handler serves the page, its assets and its configuration.
type Handler struct {
	// index is the waiting page, console the operators' console.
	index, console document
	config         []byte
	assets         map[string]asset
	headers        map[string]string
	// en is the English messages, and codes the languages the page
	// speaks: what a queue's own wording is checked against (CheckTexts).
	en    map[string]message
	codes map[string]bool
}

// Cache lifetimes. Asset URLs carry a content hash (?v=), so a versioned URL
// never changes and may be cached for a year; an unversioned one briefly.
const (
	immutableCache = "public, max-age=31536000, immutable"
	briefCache     = "public, max-age=300"
)

// New builds the handler. Empty fields of cfg take their defaults.
func New(cfg Config) (*Handler, error) {
	cfg = cfg.withDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	orderOrigin, _ := origin(cfg.OrderServiceURL)
	notifyOrigin, _ := origin(cfg.NotificationServiceURL)
	h := &Handler{assets: map[string]asset{}}
	err := fs.WalkDir(files, "static", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || p == "static/index.html" {
			return err
		}
		b, err := files.ReadFile(p)
		if err != nil {
			return err
		}
		sum := sha256.Sum256(b)
		hash := hex.EncodeToString(sum[:])[:12]
		h.assets[strings.TrimPrefix(p, "static/")] = asset{body: b, ctype: contentType(p), etag: `"` + hash + `"`, hash: hash, gz: gzipped(b)}
		return nil
	})
	if err != nil {
		return nil, err
	}
	if h.index, err = h.document("static/index.html"); err != nil {
		return nil, err
	}
	if h.console, err = h.document("console.html"); err != nil {
		return nil, err
	}
	langs, err := h.languages()
	if err != nil {
		return nil, err
	}
	h.codes = map[string]bool{}
	for _, l := range langs {
		h.codes[l.Code] = true
	}
	h.config, err = json.Marshal(struct {
		OrderServiceURL        string     `json:"orderServiceUrl"`
		NotificationServiceURL string     `json:"notificationServiceUrl"`
		DefaultQueue           string     `json:"defaultQueue"`
		DevMode                bool       `json:"devMode"`
		Languages              []Language `json:"languages"`
	}{strings.TrimRight(cfg.OrderServiceURL, "/"), strings.TrimRight(cfg.NotificationServiceURL, "/"), cfg.DefaultQueue, cfg.DevMode, langs})
	if err != nil {
		return nil, err
	}
	h.headers = map[string]string{
		// Scripts, the proof-of-work worker and styles from this origin only
		// (no inline code at all); the page may call itself, the
		// order-service and the stream.
		"Content-Security-Policy": "default-src 'none'; script-src 'self'; worker-src 'self'; style-src 'self'; img-src 'self' data:; " +
			"connect-src 'self' " + orderOrigin + " " + notifyOrigin + "; " +
			"base-uri 'none'; form-action 'self'; frame-ancestors 'none'",
		"X-Content-Type-Options": "nosniff",
		// The stream URL carries the user's JWT: never leak it in a Referer.
		"Referrer-Policy": "no-referrer",
		"X-Frame-Options": "DENY",
	}
	return h, nil
}

// Language is one language the page speaks, as /config.json lists it.
type Language struct {
	// Code is the BCP 47 tag of the translation file's name.
	Code string `json:"code"`
	// Name is the language's own name (its "lang.name" message).
	Name string `json:"name"`
	// Dir is the writing direction: "rtl" or "ltr".
	Dir string `json:"dir"`
	// URL is the translation file's versioned address.
	URL string `json:"url"`
}

// rtl are the languages written right to left.
var rtl = map[string]bool{"ar": true, "fa": true, "he": true, "ur": true}

// languages lists the translation files (static/i18n/<code>.json),
// English first, after checking each against English: the same keys, the
// same {slots} in each message, a plural message's forms each with them.
func (h *Handler) languages() ([]Language, error) {
	en, err := messagesOf(h.assets["i18n/en.json"].body)
	if err != nil {
		return nil, fmt.Errorf("i18n/en.json: %w", err)
	}
	h.en = en
	var out []Language
	for name, a := range h.assets {
		code, ok := strings.CutPrefix(strings.TrimSuffix(name, ".json"), "i18n/")
		if !ok || !strings.HasSuffix(name, ".json") {
			continue
		}
		msgs, err := messagesOf(a.body)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		if err := sameMessages(en, msgs); err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		dir := "ltr"
		if rtl[code] {
			dir = "rtl"
		}
		out = append(out, Language{Code: code, Name: msgs["lang.name"].forms["other"], Dir: dir, URL: "/static/" + name + "?v=" + a.hash})
	}
	slices.SortFunc(out, func(a, b Language) int {
		switch {
		case a.Code == "en":
			return -1
		case b.Code == "en":
			return 1
		}
		return strings.Compare(a.Code, b.Code)
	})
	return out, nil
}

// message is one translation: a string (its one form, "other"), or a
// plural message's forms by Intl plural category.
type message struct {
	forms  map[string]string
	plural bool
}

func (m *message) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err == nil {
		m.forms = map[string]string{"other": s}
		return nil
	}
	if err := json.Unmarshal(b, &m.forms); err != nil {
		return errors.New("a message is a string or an object of plural forms")
	}
	m.plural = true
	for cat := range m.forms {
		if !pluralCategories[cat] {
			return fmt.Errorf("%q is no plural category", cat)
		}
	}
	if _, ok := m.forms["other"]; !ok {
		return errors.New(`a plural message needs its "other" form`)
	}
	return nil
}

var pluralCategories = map[string]bool{"zero": true, "one": true, "two": true, "few": true, "many": true, "other": true}

func messagesOf(b []byte) (map[string]message, error) {
	var m map[string]message
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, err
	}
	return m, nil
}

var slot = regexp.MustCompile(`\{(\w+)\}`)

// slots is the set of {slots} of s, sorted.
func slots(s string) []string {
	var out []string
	for _, m := range slot.FindAllStringSubmatch(s, -1) {
		out = append(out, m[1])
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// sameMessages reports every way msgs differs from en: a key missing or
// extra, a form whose {slots} are not English's.
func sameMessages(en, msgs map[string]message) error {
	var errs []error
	for key, want := range en {
		got, ok := msgs[key]
		if !ok {
			errs = append(errs, fmt.Errorf("%s is missing", key))
			continue
		}
		if want.plural != got.plural {
			errs = append(errs, fmt.Errorf("%s: a plural message in one language, a string in the other", key))
		}
		for cat, g := range badSlots(want, got) {
			errs = append(errs, fmt.Errorf("%s (%s) has the slots %v, English %v", key, cat, g, slots(want.forms["other"])))
		}
	}
	for key := range msgs {
		if _, ok := en[key]; !ok {
			errs = append(errs, fmt.Errorf("%s is not an English message", key))
		}
	}
	slices.SortFunc(errs, func(a, b error) int { return strings.Compare(a.Error(), b.Error()) })
	return errors.Join(errs...)
}

// badSlots is, by plural category, the {slots} of each form of got that
// are not want's.
func badSlots(want, got message) map[string][]string {
	w := slots(want.forms["other"])
	bad := map[string][]string{}
	for cat, form := range got.forms {
		if g := slots(form); !slices.Equal(w, g) {
			bad[cat] = g
		}
	}
	return bad
}

func contentType(p string) string {
	switch path.Ext(p) {
	case ".json":
		return "application/json; charset=utf-8"
	case ".js":
		return "text/javascript; charset=utf-8"
	case ".css":
		return "text/css; charset=utf-8"
	case ".html":
		return "text/html; charset=utf-8"
	case ".svg":
		return "image/svg+xml"
	}
	return "application/octet-stream"
}

func (h *Handler) secure(w http.ResponseWriter) {
	for k, v := range h.headers {
		w.Header().Set(k, v)
	}
}

// document is an HTML document pointing at the current version of each
// asset, and the same gzipped once at start.
type document struct{ body, gz []byte }

// document reads the embedded HTML file name and versions its asset URLs.
func (h *Handler) document(name string) (document, error) {
	b, err := files.ReadFile(name)
	if err != nil {
		return document{}, err
	}
	for asset, a := range h.assets {
		b = bytes.ReplaceAll(b, []byte(`"/static/`+asset+`"`), []byte(`"/static/`+asset+`?v=`+a.hash+`"`))
	}
	return document{body: b, gz: gzipped(b)}, nil
}

// serve writes d. A document is never cached: a deploy must reach everyone
// at their next load, with the new asset versions.
func (h *Handler) serve(w http.ResponseWriter, r *http.Request, d document) {
	h.secure(w)
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	body := d.body
	if takesGzip(w, r) {
		body = d.gz
	}
	w.WriteHeader(http.StatusOK)
	if r.Method != http.MethodHead {
		_, _ = w.Write(body)
	}
}

// Page serves the waiting page.
func (h *Handler) Page(w http.ResponseWriter, r *http.Request) { h.serve(w, r, h.index) }

// Console serves the operators' console (/console): one document, its
// script and style under /static/console/, the page's headers (no inline
// code; it calls this origin and the order-service).
func (h *Handler) Console(w http.ResponseWriter, r *http.Request) { h.serve(w, r, h.console) }

// gzipped is b compressed at the best level (once, at start).
func gzipped(b []byte) []byte {
	var buf bytes.Buffer
	zw, _ := gzip.NewWriterLevel(&buf, gzip.BestCompression)
	_, _ = zw.Write(b)
	_ = zw.Close()
	return buf.Bytes()
}

// takesGzip reports whether r accepts a gzipped body, and if so marks the
// response as one; either way the answer varies by Accept-Encoding.
func takesGzip(w http.ResponseWriter, r *http.Request) bool {
	w.Header().Add("Vary", "Accept-Encoding")
	for _, part := range strings.Split(r.Header.Get("Accept-Encoding"), ",") {
		coding, q, _ := strings.Cut(strings.TrimSpace(part), ";")
		if strings.EqualFold(strings.TrimSpace(coding), "gzip") && strings.ReplaceAll(q, " ", "") != "q=0" {
			w.Header().Set("Content-Encoding", "gzip")
			return true
		}
	}
	return false
}

// Config serves /config.json.
func (h *Handler) Config(w http.ResponseWriter, r *http.Request) {
	h.secure(w)
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(http.StatusOK)
	if r.Method != http.MethodHead {
		_, _ = w.Write(h.config)
	}
}

// Static serves /static/{name}, with an ETag and a cache lifetime that
// depends on whether the URL is versioned.
func (h *Handler) Static(w http.ResponseWriter, r *http.Request) {
	a, ok := h.assets[strings.TrimPrefix(r.URL.Path, "/static/")]
	if !ok {
		problem.Write(w, r, problem.New(http.StatusNotFound, problem.TypeNotFound, "no such file"))
		return
	}
	h.secure(w)
	w.Header().Set("Content-Type", a.ctype)
	if r.URL.Query().Get("v") == a.hash {
		w.Header().Set("Cache-Control", immutableCache)
	} else {
		w.Header().Set("Cache-Control", briefCache)
	}
	body, etag := a.body, a.etag
	if takesGzip(w, r) {
		body, etag = a.gz, strings.TrimSuffix(a.etag, `"`)+`-gz"`
	}
	w.Header().Set("ETag", etag)
	// ServeContent answers If-None-Match with 304 and handles HEAD and ranges.
	http.ServeContent(w, r, "", time.Time{}, bytes.NewReader(body))
}
