package web

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/pisyncd/pisyncd/eventlog"
	"github.com/pisyncd/pisyncd/projection"
)

// GET /api/events streams entries as the projection applies them, as
// Server-Sent Events or (format=ndjson) one JSON object a line. Every
// event carries a position (the SSE id, the NDJSON "pos"): per stream, the
// sequence of the last entry sent. A client that reconnects with it
// (Last-Event-ID, or ?after=) gets what came after, none twice. Query:
//
//	session=ID   one session only
//	node=ID      entries published by one node only
//	type=T       entries of one type only (tombstone: deletions)
//	after=POS    resume from a position; without it, from now (a position
//	             past a stream's end is refused: checkResume)
//	render=1     each entry also as the HTML the page shows (entry omitted
//	             with raw=0)
//	format=ndjson
//
// docs/SUBSCRIBING.md documents it for subscribers.

// pingEvery keeps idle streams open through proxies and lets a dead peer
// be found.
const pingEvery = 15 * time.Second

// event is one entry as the stream sends it.
type event struct {
	Pos string `json:"pos"`
	projection.TailEntry
	HTML string   `json:"html,omitempty"`
	Row  *treeRow `json:"row,omitempty"`
}

func (s *Server) serveEvents(w http.ResponseWriter, r *http.Request) {
	select {
	case s.streams <- struct{}{}:
		defer func() { <-s.streams }()
	default:
		http.Error(w, fmt.Sprintf("web: events: %d event streams are open already, the most this daemon keeps; close one", cap(s.streams)), http.StatusServiceUnavailable)
		return
	}
	q := r.URL.Query()
	o := projection.TailOptions{Session: q.Get("session"), Type: q.Get("type")}
	if o.Session != "" {
		if err := eventlog.CheckSID(o.Session); err != nil {
			http.Error(w, "web: events: "+err.Error(), http.StatusBadRequest)
			return
		}
	}
	node := q.Get("node")
	if node != "" && !eventlog.ValidNodeID(node) {
		http.Error(w, "web: events: bad node id", http.StatusBadRequest)
		return
	}
	ndjson := q.Get("format") == "ndjson"
	if f := q.Get("format"); f != "" && f != "ndjson" && f != "sse" {
		http.Error(w, "web: events: format is sse or ndjson", http.StatusBadRequest)
		return
	}
	render, raw := q.Get("render") == "1", q.Get("raw") != "0"
	at := q.Get("after")
	if id := r.Header.Get("Last-Event-ID"); id != "" {
		at = id // a reconnecting EventSource: its last id wins
	}
	var err error
	if at == "" {
		o.After, err = s.opts.Source.Positions(r.Context())
		if err != nil {
			http.Error(w, "web: events: "+err.Error(), http.StatusServiceUnavailable)
			return
		}
	} else if o.After, err = parsePos(at); err != nil {
		http.Error(w, "web: events: "+err.Error(), http.StatusBadRequest)
		return
	} else if ok := s.checkResume(w, r, o.After); !ok {
		return
	}
	pos := maps.Clone(o.After)

	h := w.Header()
	if ndjson {
		h.Set("Content-Type", "application/x-ndjson")
	} else {
		h.Set("Content-Type", "text/event-stream")
	}
	h.Set("Cache-Control", "no-store")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	fl, _ := w.(http.Flusher)

	var mu sync.Mutex // the writer: entries and pings
	var buf bytes.Buffer
	send := func(name string, v any) error {
		mu.Lock()
		defer mu.Unlock()
		buf.Reset()
		body, err := json.Marshal(v)
		if err != nil {
			return err
		}
		if ndjson {
			buf.Write(body)
			buf.WriteByte('\n')
		} else {
			if name == "ready" {
				buf.WriteString("retry: 1000\n") // reconnect soon after a drop
			}
			buf.WriteString("id: ")
			buf.WriteString(formatPos(pos))
			buf.WriteString("\nevent: ")
			buf.WriteString(name)
			buf.WriteString("\ndata: ")
			buf.Write(body) // json.Marshal leaves no raw newline in it
			buf.WriteString("\n\n")
		}
		if _, err := w.Write(buf.Bytes()); err != nil {
			return err
		}
		if fl != nil {
			fl.Flush()
		}
		return nil
	}
	// The first event names the position the stream starts at, so a
	// client that sees no entry before it reconnects still resumes there.
	// An NDJSON line has no event name: "ready" says what it is (it was
	// a bare {"pos"} before, which a reader told from an entry only by
	// its missing fields).
	if err := send("ready", readyEvent{Ready: true, Pos: formatPos(pos)}); err != nil {
		return
	}

	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		t := time.NewTicker(pingEvery)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				mu.Lock()
				if ndjson {
					w.Write([]byte("{}\n"))
				} else {
					w.Write([]byte(": ping\n\n"))
				}
				if fl != nil {
					fl.Flush()
				}
				mu.Unlock()
			}
		}
	}()
	defer func() {
		close(done)
		wg.Wait()
	}()

	err = s.opts.Source.Tail(r.Context(), o, func(e projection.TailEntry) error {
		mu.Lock()
		pos[e.Stream] = e.Seq
		mu.Unlock()
		if node != "" && e.Node != node {
			return nil
		}
		ev := event{Pos: "", TailEntry: e}
		if render && e.Op == "" && len(e.Entry) > 0 {
			ev.HTML, ev.Row = s.renderOne(e)
		}
		if !raw {
			ev.Entry = nil
		}
		mu.Lock()
		ev.Pos = formatPos(pos)
		mu.Unlock()
		name := "entry"
		if e.Op != "" {
			name = e.Op
		}
		return send(name, ev)
	})
	if err != nil && r.Context().Err() == nil {
		msg := err.Error()
		if errors.Is(err, projection.ErrSlowSubscriber) {
			msg += "; reconnect with the last position to resume"
		}
		send("error", map[string]string{"error": msg})
	}
}

// readyEvent is the first event of a stream.
type readyEvent struct {
	Ready bool   `json:"ready"`
	Pos   string `json:"pos"`
}

// resumeError is the answer to a position past the end of a stream.
type resumeError struct {
	Error string `json:"error"`
	// End is where the streams end now: the position to compare.
	End string `json:"end"`
}

// checkResume refuses a position past where a stream ends now, and
// reports whether it answered nothing. Such a position is from another
// store (the state dir was wiped or the daemon reinstalled while the
// client kept its position): accepted, every entry stored from then on
// would have a sequence at or below it and be skipped as sent already,
// until the new stream caught up with the old, maybe never.
func (s *Server) checkResume(w http.ResponseWriter, r *http.Request, after projection.Src) bool {
	end, err := s.opts.Source.Positions(r.Context())
	if err != nil {
		http.Error(w, "web: events: "+err.Error(), http.StatusServiceUnavailable)
		return false
	}
	for _, stream := range slices.Sorted(maps.Keys(after)) {
		last, ok := end[stream]
		if !ok || after[stream] <= last {
			continue // a stream not followed here is not read either
		}
		jsonHeaders(w)
		w.WriteHeader(http.StatusConflict)
		newEncoder(w).Encode(resumeError{
			Error: fmt.Sprintf("web: events: position %s:%d is past the end of the stream, which ends at %s:%d: "+
				"the position is from another store (a state dir wiped or a daemon reinstalled since it was sent); "+
				"resume from the start (after=%s:0) or from now (no after)", stream, after[stream], stream, last, stream),
			End: formatPos(end),
		})
		return false
	}
	return true
}

// renderOne renders an entry that just arrived, alone (a tool result is
// not paired with its call), and its tree row.
func (s *Server) renderOne(e projection.TailEntry) (string, *treeRow) {
	var b bytes.Buffer
	c := &entryCtx{sid: e.Session, id: e.ID, node: e.Node, images: imagesOf(e.Session)}
	s.md.entry(&b, e.Entry, c)
	row := &treeRow{ID: e.ID, Parent: e.ParentID, Type: e.Type}
	if d, err := parseLean(e.Entry); err == nil {
		row.Type, row.Text = summarize(d)
		if d.Type == "label" {
			row.Target = display(d.TargetID)
		}
	}
	return b.String(), row
}
