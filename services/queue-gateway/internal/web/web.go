// Package web serves the waiting-room page: one HTML document, its script,
// the Web Worker that solves an enter challenge, and its style sheet
// (embedded, no build step), and /config.json, which tells the page where
// the order-service and the notification-service are.
package web

import (
	"bytes"
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

//go:embed static
var files embed.FS

// asset is one embedded file, ready to serve.
type asset struct {
	body  []byte
	ctype string
	etag  string
	hash  string // short content hash, the ?v= of its URL
}

// Handler serves the page, its assets and its configuration.
type Handler struct {
	index   []byte
	config  []byte
	assets  map[string]asset
	headers map[string]string
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
		h.assets[strings.TrimPrefix(p, "static/")] = asset{body: b, ctype: contentType(p), etag: `"` + hash + `"`, hash: hash}
		return nil
	})
	if err != nil {
		return nil, err
	}
	index, err := files.ReadFile("static/index.html")
	if err != nil {
		return nil, err
	}
	// Point the page at the current version of each asset.
	for name, a := range h.assets {
		index = bytes.ReplaceAll(index, []byte(`"/static/`+name+`"`), []byte(`"/static/`+name+`?v=`+a.hash+`"`))
	}
	h.index = index
	h.config, err = json.Marshal(struct {
		OrderServiceURL        string `json:"orderServiceUrl"`
		NotificationServiceURL string `json:"notificationServiceUrl"`
		DefaultQueue           string `json:"defaultQueue"`
		DevMode                bool   `json:"devMode"`
	}{strings.TrimRight(cfg.OrderServiceURL, "/"), strings.TrimRight(cfg.NotificationServiceURL, "/"), cfg.DefaultQueue, cfg.DevMode})
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

func contentType(p string) string {
	switch path.Ext(p) {
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

// Page serves the HTML document. It is never cached: a deploy must reach
// everyone waiting at their next load, with the new asset versions.
func (h *Handler) Page(w http.ResponseWriter, r *http.Request) {
	h.secure(w)
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(http.StatusOK)
	if r.Method != http.MethodHead {
		_, _ = w.Write(h.index)
	}
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
	w.Header().Set("ETag", a.etag)
	if r.URL.Query().Get("v") == a.hash {
		w.Header().Set("Cache-Control", immutableCache)
	} else {
		w.Header().Set("Cache-Control", briefCache)
	}
	// ServeContent answers If-None-Match with 304 and handles HEAD and ranges.
	http.ServeContent(w, r, "", time.Time{}, bytes.NewReader(a.body))
}
