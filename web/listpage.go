package web

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"time"
)

// listHead is how many of the newest sessions the list page carries in
// itself, so that its first rows are drawn without waiting for an answer
// (docs/PERFORMANCE.md, the web view): enough to fill a tall screen.
const listHead = 100

// listHeadSlot is where index.html takes them: a JSON data block, which
// the browser never runs. encoding/json escapes '<', '>' and '&', so no
// session text can close the block.
var listHeadSlot = []byte(`<script type="application/json" id="list-first">null</script>`)

// catalogWait bounds how long the page waits for a worker still starting;
// past it the page goes without the rows and fetches them.
const catalogWait = 50 * time.Millisecond

// serveList serves the sessions page with the newest sessions in it.
func (s *Server) serveList(w http.ResponseWriter, r *http.Request) {
	page := s.assets.pages["index.html"]
	ctx, cancel := context.WithTimeout(r.Context(), catalogWait)
	defer cancel()
	if cat, err := s.opts.Source.Catalog(ctx); err == nil {
		if head, err := json.Marshal(s.listAnswer(cat, listHead)); err == nil {
			slot := bytes.Replace(listHeadSlot, []byte("null"), head, 1)
			page = bytes.Replace(page, listHeadSlot, slot, 1)
		}
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	// The page carries the newest sessions' first messages: kept in no
	// cache, where an erased session's text would outlive it.
	w.Header().Set("Cache-Control", "no-store")
	w.Write(page)
}
