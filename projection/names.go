package projection

import (
	"strings"
	"sync"

	"github.com/pisyncd/pisyncd/session"
)

// names keeps one copy of the short strings that many sessions' catalog
// entries share: node ids, stream names, working folders. Each
// entry held copies of its own (read from the bucket after a restart, or
// cloned off an event's message, which it must not keep alive): with
// 10,000 sessions, about 2.5 MB of a 34 MB heap (docs/PERFORMANCE.md,
// "The catalog's shared strings").
type names struct {
	mu sync.Mutex
	m  map[string]string
}

// maxNames and maxNameLen bound the table (to 1 MiB of text, whatever
// sessions come and go): past them a string is copied as before, so that
// sessions with many distinct or long folders (a hostile node's) cost what
// they did without it.
const (
	maxNames   = 4096
	maxNameLen = 256
)

// get returns the kept copy of s, keeping one when there is room. The
// result never shares memory with s (a substring of a message).
func (n *names) get(s string) string {
	if s == "" {
		return ""
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	if v, ok := n.m[s]; ok {
		return v
	}
	v := strings.Clone(s)
	if len(n.m) < maxNames && len(v) <= maxNameLen {
		if n.m == nil {
			n.m = make(map[string]string)
		}
		n.m[v] = v
	}
	return v
}

// share points the strings of a catalog entry read from the bucket at
// the kept copies, its rule set at session's own name for it (what a
// context view's Rules holds), and its File at its node's file, which
// holds the same text.
func (n *names) share(c *CatalogEntry) {
	c.Cwd = n.get(c.Cwd)
	if r, err := session.ParseRuleSet(c.Rules); err == nil {
		c.Rules = r.String()
	}
	for i := range c.Nodes {
		c.Nodes[i] = n.get(c.Nodes[i])
	}
	for i := range c.DeletedOn {
		c.DeletedOn[i] = n.get(c.DeletedOn[i])
	}
	for i := range c.Src {
		c.Src[i].Stream = n.get(c.Src[i].Stream)
	}
	for i := range c.Files {
		c.Files[i].Node = n.get(c.Files[i].Node)
		if c.Files[i].File == c.File {
			c.File = c.Files[i].File
		}
	}
}
