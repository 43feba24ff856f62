package projection

import (
	"encoding/base64"
	"strconv"

	"github.com/pisyncd/pisyncd/eventlog"
)

// Bucket is the KV bucket that holds the views.
const Bucket = "pi_proj"

// Key layout. A session's keys share the prefix s.<tok>; the stream
// positions live under pos.
//
//	s.<tok>.cat       CatalogEntry
//	s.<tok>.leaf      LeafView
//	s.<tok>.heads     HeadsView
//	s.<tok>.ctx       ContextView (the index head: settings, page count)
//	s.<tok>.ctx.<n>   ContextPage n
//	pos.<stream>      the last stream sequence whose views are written
//	rules             the rule set mode the views were computed under (rules.go)
const (
	sessionPrefix = "s."
	posPrefix     = "pos."
	catalogFilter = "s.*.cat"
)

// keyToken turns a session id into one KV key token. KV keys allow
// [-/_=.a-zA-Z0-9]; ids made of [A-Za-z0-9_-] stay readable, anything else
// becomes "=" + unpadded base64url ("=" never starts a plain id, so the
// mapping is reversible).
func keyToken(sid string) string {
	if eventlog.PlainToken(sid) {
		return sid
	}
	return "=" + base64.RawURLEncoding.EncodeToString([]byte(sid))
}

func sessionKey(sid, view string) string { return sessionPrefix + keyToken(sid) + "." + view }

func pageKey(sid string, n int) string { return sessionKey(sid, "ctx."+strconv.Itoa(n)) }

func posKey(stream string) string { return posPrefix + stream }
