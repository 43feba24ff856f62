package web

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"net"
	"net/http"
	"net/url"
	"os"
	"path"
	"strings"
)

// csp allows nothing but the daemon's own scripts, styles, images and
// connections: session text that slips into markup still cannot run,
// load, frame or post anything.
const csp = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; " +
	"connect-src 'self'; base-uri 'none'; frame-ancestors 'none'; form-action 'none'"

// TokenHeader carries the per-daemon token: a program presents it on
// every request (or as Authorization: Bearer), a browser once, in the
// link `pisyncd web` prints (TokenParam), after which a cookie carries
// it. A request other than GET and HEAD must carry the header whatever
// else it has.
const TokenHeader = "X-Pisync-Token"

// TokenParam is the query parameter of the link that lets a browser in.
const TokenParam = "token"

// NewToken makes a random token: 32 bytes, in hex.
func NewToken() (string, error) {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return "", err
	}
	return hex.EncodeToString(b), nil
}

// Guard is what the view's own answers go through, for another handler on
// the same listener (the daemon's /metrics).
func (s *Server) Guard(next http.Handler) http.Handler { return s.guard(next) }

// guard wraps every answer: it sets the security headers, refuses a Host
// the daemon is not known by (a DNS-rebinding page reaches the loopback
// port under its own name), refuses a request without the token (the
// listener is on loopback, where every user of the machine reaches it,
// and the sessions are the user's alone), and refuses any request that
// could change state unless it carries the token in its header (a
// cross-site form can send a POST but not a custom header).
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
		if !s.admit(w, r) {
			return
		}
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			if !s.tokenIs(r.Header.Get(TokenHeader)) {
				http.Error(w, "web: "+r.Method+" needs the "+TokenHeader+" header", http.StatusForbidden)
				return
			}
		}
		next.ServeHTTP(w, r)
	})
}

// cookieIn reports whether one of the request's cookies of this port's
// name holds the token. Any one, not the first: a browser sends the
// cookies of every port of the host, a cookie set with a longer Path
// first, so a program of another user on another port could set a decoy
// of the same name for /s/ that, judged alone, locked the user out of
// every session page until they cleared their cookies (a web probe,
// 2026-12-07).
func (s *Server) cookieIn(r *http.Request) bool {
	for _, c := range r.CookiesNamed(cookieName(r.Host)) {
		if c.Value != "" && subtle.ConstantTimeCompare([]byte(c.Value), []byte(s.cookie)) == 1 {
			return true
		}
	}
	return false
}

// admit lets a request in that carries the token: in the link's query
// (the browser then gets the cookie and is sent to the same address
// without it, so the token stays out of the page's address, its links and
// the Referer it sends; the browser's history keeps the link as it was
// opened, token and all, as it keeps any address typed or clicked: the
// history is the user's, 0700 with the browser's profile), in the cookie,
// or in a header. It answers any other request itself and reports false.
func (s *Server) admit(w http.ResponseWriter, r *http.Request) bool {
	q := r.URL.Query()
	if q.Has(TokenParam) {
		if !s.tokenIs(q.Get(TokenParam)) {
			http.Error(w, "web: this link's token is not this daemon's: `pisyncd web` prints the link that holds it", http.StatusUnauthorized)
			return false
		}
		http.SetCookie(w, &http.Cookie{Name: cookieName(r.Host), Value: s.cookie, Path: "/", HttpOnly: true, SameSite: http.SameSiteLaxMode})
		q.Del(TokenParam)
		// Cleaned: a path of "//host/..." would send the browser to
		// another site, a protocol-relative address in Location. As it
		// came, escapes and all: a session id "a/b" is /s/a%2Fb.
		raw := path.Clean("/" + r.URL.EscapedPath())
		dec, err := url.PathUnescape(raw)
		if err != nil {
			raw, dec = "/", "/"
		}
		u := url.URL{Path: dec, RawPath: raw, RawQuery: q.Encode()}
		http.Redirect(w, r, u.RequestURI(), http.StatusSeeOther)
		return false
	}
	if s.cookieIn(r) {
		// The browser sends it to every port of this host (peer.go): it
		// counts only from a program of the daemon's own user.
		if uid, ok := peerUID(r.Context()); ok && uid != os.Geteuid() {
			w.Header().Set("Connection", "close")
			http.Error(w, "web: this cookie came from another user's program; the view takes it only from its own user's browser", http.StatusUnauthorized)
			return false
		}
		return true
	}
	if s.tokenIs(BearerToken(r)) {
		return true
	}
	if s.tokenIs(r.Header.Get(TokenHeader)) {
		return true
	}
	// The connection goes with the answer: one kept open without the
	// token would only hold a file descriptor of the daemon's.
	w.Header().Set("Connection", "close")
	w.Header().Set("WWW-Authenticate", `Bearer realm="pisyncd"`)
	http.Error(w, "web: the view needs this daemon's token, which only its user can read: open the link `pisyncd web` prints, or send the token in the "+TokenHeader+" header or as a bearer token (Authorization: Bearer TOKEN)", http.StatusUnauthorized)
	return false
}

// cookieValue is what the cookie holds for token: derived from it, not
// it, so that a cookie that reached another user (peer.go) is no token in
// a header.
func cookieValue(token string) string {
	m := hmac.New(sha256.New, []byte(token))
	m.Write([]byte("pisyncd web cookie"))
	return hex.EncodeToString(m.Sum(nil))
}

// BearerToken is the token r carries as "Authorization: Bearer TOKEN",
// the scheme in any case (RFC 9110); "" if none.
func BearerToken(r *http.Request) string {
	if scheme, token, ok := strings.Cut(r.Header.Get("Authorization"), " "); ok && strings.EqualFold(scheme, "Bearer") {
		return token
	}
	return ""
}

// tokenIs reports whether got is the token, in constant time.
func (s *Server) tokenIs(got string) bool {
	return got != "" && subtle.ConstantTimeCompare([]byte(got), []byte(s.token)) == 1
}

// cookieName is the token's cookie for the daemon at host: a browser keeps
// cookies by host name alone, and two daemons on two ports of 127.0.0.1
// (two users) must not overwrite each other's.
func cookieName(host string) string {
	if _, port, err := net.SplitHostPort(host); err == nil && port != "" && strings.Trim(port, "0123456789") == "" {
		return "pisync_token_" + port
	}
	return "pisync_token"
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
