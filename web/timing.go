package web

import (
	"bytes"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// timings are the parts of an answer's time, sent as a Server-Timing
// header: the browser shows them beside the request (and the page's
// performance entries hold them), so a slow page says which part was slow.
type timings struct {
	last  time.Time
	parts []string
}

func newTimings() *timings { return &timings{last: time.Now()} }

// mark ends the part called name.
func (t *timings) mark(name string) {
	now := time.Now()
	t.parts = append(t.parts, name+";dur="+strconv.FormatFloat(float64(now.Sub(t.last).Microseconds())/1000, 'f', 1, 64))
	t.last = now
}

// writeJSON encodes v first, so that the encoding's time is in the header
// too, then writes header and body.
func (t *timings) writeJSON(w http.ResponseWriter, v any) {
	var b bytes.Buffer
	if err := newEncoder(&b).Encode(v); err != nil {
		http.Error(w, "web: encode: "+err.Error(), http.StatusInternalServerError)
		return
	}
	t.mark("json")
	w.Header().Set("Server-Timing", strings.Join(t.parts, ", "))
	jsonHeaders(w)
	w.Write(b.Bytes())
}
