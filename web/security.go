package web

import (
	"crypto/rand"
	"crypto/subtle"
	"encoding/hex"
	"net"
	"net/http"
	"strings"
)

// csp allows nothing but the daemon's own scripts, styles, images and
// connections: session text that slips into markup still cannot run,
// load, frame or post anything.
const csp = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; " +
	"connect-src 'self'; base-uri 'none'; frame-ancestors 'none'; form-action 'none'"

// TokenHeader carries the per-daemon token that every request other than
// GET and HEAD must present.
const TokenHeader = "X-Pisync-Token"

// newToken makes a random token for a daemon that was given none.
func newToken() (string, error) {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return "", err
	}
	return hex.EncodeToString(b), nil
}

// guard wraps every answer: it sets the security headers, refuses a Host
// the daemon is not known by (a DNS-rebinding page reaches the loopback
// port under its own name), and refuses any request that could change
// state unless it carries the token (a cross-site form can send a POST
// but not a custom header).
func (s *Server) guard(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Content-Security-Policy", csp)
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("X-Frame-Options", "DENY")
		h.Set("Referrer-Policy", "no-referrer")
		h.Set("Cross-Origin-Opener-Policy", "same-origin")
		h.Set("Cross-Origin-Resource-Policy", "same-origin")
		if !s.hostAllowed(r.Host) {
			http.Error(w, "web: unknown Host "+quoteHost(r.Host)+"; the view answers only to loopback names and PISYNC_WEB_HOSTS", http.StatusMisdirectedRequest)
			return
		}
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			got := r.Header.Get(TokenHeader)
			if got == "" || subtle.ConstantTimeCompare([]byte(got), []byte(s.token)) != 1 {
				http.Error(w, "web: "+r.Method+" needs the "+TokenHeader+" header", http.StatusForbidden)
				return
			}
		}
		next.ServeHTTP(w, r)
	})
}

// hostAllowed reports whether host (a Host header, with or without port)
// names this daemon: a loopback name or address, or one configured.
func (s *Server) hostAllowed(host string) bool {
	name := host
	if h, _, err := net.SplitHostPort(host); err == nil {
		name = h
	}
	name = strings.ToLower(strings.TrimSuffix(strings.Trim(name, "[]"), "."))
	if name == "" {
		return false
	}
	if name == "localhost" || strings.HasSuffix(name, ".localhost") {
		return true
	}
	if ip := net.ParseIP(name); ip != nil && ip.IsLoopback() {
		return true
	}
	for _, a := range s.opts.Hosts {
		if strings.EqualFold(strings.TrimSuffix(a, "."), name) {
			return true
		}
	}
	return false
}

// quoteHost shows a hostile Host header without letting it reshape the
// error text.
func quoteHost(h string) string {
	if len(h) > 100 {
		h = h[:100]
	}
	return strings.ToValidUTF8(strings.Map(func(r rune) rune {
		if r < 0x20 || r == 0x7f {
			return '?'
		}
		return r
	}, h), "?")
}
