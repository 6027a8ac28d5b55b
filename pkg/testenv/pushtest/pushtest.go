// Package pushtest is a push service on loopback for tests: it receives
// Web Push messages as a push service would, checks each one's VAPID
// signature (RFC 8292) and decrypts it (RFC 8291) with the keys of the
// device it is for, as the browser would. It shares no code with the
// sender: the decryption is written from the RFCs on the standard library.
package pushtest

import (
	"bytes"
	"crypto/aes"
	"crypto/cipher"
	"crypto/ecdh"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/hkdf"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

// Device is a browser's side of a subscription: its P-256 key pair and auth
// secret.
type Device struct {
	key  *ecdh.PrivateKey
	auth []byte
}

// NewDevice makes a device with fresh keys.
func NewDevice() *Device {
	k, err := ecdh.P256().GenerateKey(rand.Reader)
	if err != nil {
		panic(err)
	}
	auth := make([]byte, 16)
	_, _ = rand.Read(auth)
	return &Device{key: k, auth: auth}
}

// Keys are the subscription's keys as a browser gives them: base64url
// without padding.
func (d *Device) Keys() (p256dh, auth string) {
	return base64.RawURLEncoding.EncodeToString(d.key.PublicKey().Bytes()), base64.RawURLEncoding.EncodeToString(d.auth)
}

// Decrypt opens an aes128gcm message body (RFC 8188 with the key
// derivation of RFC 8291) of one record, as the browser does.
func (d *Device) Decrypt(body []byte) ([]byte, error) {
	if len(body) < 21 {
		return nil, errors.New("shorter than a header")
	}
	salt, rs, idlen := body[:16], binary.BigEndian.Uint32(body[16:20]), int(body[20])
	if idlen != 65 || len(body) < 21+idlen {
		return nil, fmt.Errorf("keyid of %d bytes, want the sender's 65-byte public key", idlen)
	}
	senderPub, ciphertext := body[21:21+idlen], body[21+idlen:]
	if rs < 18 || len(ciphertext) > int(rs) {
		return nil, fmt.Errorf("record size %d, ciphertext %d bytes: not one record", rs, len(ciphertext))
	}
	sender, err := ecdh.P256().NewPublicKey(senderPub)
	if err != nil {
		return nil, fmt.Errorf("sender key: %w", err)
	}
	secret, err := d.key.ECDH(sender)
	if err != nil {
		return nil, err
	}
	// IKM = HKDF(auth_secret, ecdh_secret, "WebPush: info" 0x00 ua_public as_public, 32)
	info := append(append([]byte("WebPush: info\x00"), d.key.PublicKey().Bytes()...), senderPub...)
	prkKey, err := hkdf.Extract(sha256.New, secret, d.auth)
	if err != nil {
		return nil, err
	}
	ikm, err := hkdf.Expand(sha256.New, prkKey, string(info), 32)
	if err != nil {
		return nil, err
	}
	prk, err := hkdf.Extract(sha256.New, ikm, salt)
	if err != nil {
		return nil, err
	}
	cek, err := hkdf.Expand(sha256.New, prk, "Content-Encoding: aes128gcm\x00", 16)
	if err != nil {
		return nil, err
	}
	nonce, err := hkdf.Expand(sha256.New, prk, "Content-Encoding: nonce\x00", 12)
	if err != nil {
		return nil, err
	}
	block, _ := aes.NewCipher(cek)
	gcm, _ := cipher.NewGCM(block)
	plain, err := gcm.Open(nil, nonce, ciphertext, nil)
	if err != nil {
		return nil, fmt.Errorf("decrypt: %w", err)
	}
	// The last record: data, the delimiter 0x02, then zero padding.
	plain = bytes.TrimRight(plain, "\x00")
	if len(plain) == 0 || plain[len(plain)-1] != 2 {
		return nil, errors.New("no last-record delimiter")
	}
	return plain[:len(plain)-1], nil
}

// Message is one push the server received.
type Message struct {
	// Device is the endpoint's name (Server.Endpoint).
	Device string
	// Plain is the decrypted message; Err says why there is none, or why
	// the request was not a valid push.
	Plain []byte
	Err   error
	// Size is the body's length: every message of a sender padded alike
	// has the same.
	Size    int
	TTL     int
	Urgency string
	Topic   string
	// Subject is the VAPID JWT's sub.
	Subject string
	At      time.Time
}

// Server is a push service on loopback.
type Server struct {
	URL     string
	vapid   string
	mu      sync.Mutex
	devices map[string]*Device
	got     []Message
	tries   map[string]int
	answer  func(device string, try int) (int, http.Header)
}

// NewServer starts a push service that takes messages signed with the VAPID
// public key vapid; it stops at the test's end.
func NewServer(t testing.TB, vapid string) *Server {
	s := &Server{vapid: vapid, devices: map[string]*Device{}, tries: map[string]int{}}
	srv := httptest.NewServer(http.HandlerFunc(s.serve))
	t.Cleanup(srv.Close)
	s.URL = srv.URL
	return s
}

// Endpoint registers d under name and returns its push endpoint.
func (s *Server) Endpoint(name string, d *Device) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.devices[name] = d
	return s.URL + "/push/" + name
}

// Answer sets the status (and headers) the server answers each request
// with, by device and the request's number for it (from 1); it is 201 by
// default. A message answered other than 2xx is not recorded as received.
func (s *Server) Answer(f func(device string, try int) (int, http.Header)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.answer = f
}

// Received is every message taken so far (answered 2xx), in order.
func (s *Server) Received() []Message {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Message(nil), s.got...)
}

// Tries is how many requests reached the server for device.
func (s *Server) Tries(device string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.tries[device]
}

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	name, ok := strings.CutPrefix(r.URL.Path, "/push/")
	s.mu.Lock()
	d := s.devices[name]
	s.tries[name]++
	try, answer := s.tries[name], s.answer
	s.mu.Unlock()
	if !ok || d == nil || r.Method != http.MethodPost {
		http.NotFound(w, r)
		return
	}
	body, _ := io.ReadAll(io.LimitReader(r.Body, 8<<10))
	m := Message{Device: name, Size: len(body), Urgency: r.Header.Get("Urgency"), Topic: r.Header.Get("Topic"), At: time.Now()}
	m.TTL, m.Err = strconv.Atoi(r.Header.Get("TTL"))
	if m.Err == nil && r.Header.Get("Content-Encoding") != "aes128gcm" {
		m.Err = fmt.Errorf("Content-Encoding %q, want aes128gcm", r.Header.Get("Content-Encoding"))
	}
	if m.Err == nil {
		m.Subject, m.Err = s.checkVAPID(r)
	}
	if m.Err == nil {
		m.Plain, m.Err = d.Decrypt(body)
	}
	status, hdr := http.StatusCreated, http.Header(nil)
	if answer != nil {
		status, hdr = answer(name, try)
	}
	for k, v := range hdr {
		w.Header()[k] = v
	}
	if m.Err != nil && status < 300 {
		status = http.StatusBadRequest // a push service refuses what it cannot check
	}
	if status < 300 || m.Err != nil {
		s.mu.Lock()
		s.got = append(s.got, m)
		s.mu.Unlock()
	}
	w.WriteHeader(status)
}

// checkVAPID checks the Authorization header: "vapid t=<JWT>, k=<key>",
// k the expected public key, the JWT signed ES256 by it, its aud this
// server's origin and its exp within 24 hours (RFC 8292).
func (s *Server) checkVAPID(r *http.Request) (string, error) {
	v, ok := strings.CutPrefix(r.Header.Get("Authorization"), "vapid ")
	if !ok {
		return "", errors.New("no vapid Authorization")
	}
	var tok, key string
	for _, p := range strings.Split(v, ",") {
		p = strings.TrimSpace(p)
		if x, ok := strings.CutPrefix(p, "t="); ok {
			tok = x
		} else if x, ok := strings.CutPrefix(p, "k="); ok {
			key = x
		}
	}
	if key != s.vapid {
		return "", fmt.Errorf("k=%q is not the VAPID key the subscription was made with", key)
	}
	raw, err := base64.RawURLEncoding.DecodeString(key)
	if err != nil {
		return "", err
	}
	pub, err := ecdsa.ParseUncompressedPublicKey(elliptic.P256(), raw)
	if err != nil {
		return "", err
	}
	claims := jwt.MapClaims{}
	_, err = jwt.ParseWithClaims(tok, claims, func(*jwt.Token) (any, error) { return pub, nil },
		jwt.WithValidMethods([]string{"ES256"}), jwt.WithAudience(s.URL), jwt.WithExpirationRequired())
	if err != nil {
		return "", fmt.Errorf("vapid JWT: %w", err)
	}
	exp, _ := claims.GetExpirationTime()
	if time.Until(exp.Time) > 24*time.Hour {
		return "", fmt.Errorf("vapid JWT expires %v from now, more than 24 h", time.Until(exp.Time))
	}
	sub, _ := claims["sub"].(string)
	if !strings.HasPrefix(sub, "mailto:") && !strings.HasPrefix(sub, "https:") {
		return "", fmt.Errorf("vapid sub %q is not a mailto: or https: URL", sub)
	}
	return sub, nil
}

// NewVAPID makes a VAPID key pair as the notification-service takes it
// (PUSH_VAPID_PUBLIC_KEY, PUSH_VAPID_PRIVATE_KEY): the uncompressed P-256
// public key and the private scalar, base64url.
func NewVAPID() (public, private string) {
	k, err := ecdh.P256().GenerateKey(rand.Reader)
	if err != nil {
		panic(err)
	}
	return base64.RawURLEncoding.EncodeToString(k.PublicKey().Bytes()), base64.RawURLEncoding.EncodeToString(k.Bytes())
}
