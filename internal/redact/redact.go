// Package redact keeps the secrets a hub URL can carry from leaking: URL
// hides the password or token written into it (tls://user:pass@host), so
// that it can be logged, printed by `pisyncd status` or put in an error;
// PlainRemote tells a URL over which credentials would cross the network
// readable. It is the one place that knows how: every URL pisyncd prints
// goes through URL or URLs.
package redact

import (
	"net"
	"net/url"
	"strings"
)

// PlainRemote reports whether a connection to u goes without TLS to a host
// that is not loopback: credentials sent over it are readable by anyone
// on the way, and a man in the middle can answer for the hub.
func PlainRemote(u *url.URL) bool {
	switch u.Scheme {
	case "tls", "wss":
		return false
	}
	h := u.Hostname()
	if h == "localhost" {
		return false
	}
	ip := net.ParseIP(h)
	return ip == nil || !ip.IsLoopback()
}

// Mask replaces the user information of a URL.
const Mask = "REDACTED"

// URL returns s with everything between the scheme and the last '@'
// replaced by Mask: a user name alone is a NATS token, so the
// user is hidden along with the password. It works on text that does not
// parse as a URL too (a password with a space or an unescaped '/' still
// comes out hidden), because such text is exactly what an error message
// quotes.
func URL(s string) string {
	start := 0
	if i := strings.Index(s, "://"); i >= 0 {
		start = i + 3
	}
	rest := s[start:]
	// The last '@' of all, not the first after the authority: a password
	// may hold '/', '?', '#' or '@' unescaped, and hiding too much of a
	// URL with an '@' in its path is the safe mistake.
	at := strings.LastIndex(rest, "@")
	if at < 0 {
		return s
	}
	return s[:start] + Mask + rest[at:]
}

// URLs redacts each of urls into a new slice.
func URLs(urls []string) []string {
	if urls == nil {
		return nil
	}
	out := make([]string, len(urls))
	for i, u := range urls {
		out[i] = URL(u)
	}
	return out
}
