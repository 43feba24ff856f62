package web

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/pisyncd/pisyncd/internal/testenv"
)

// TestEventsRefusePositionPastTheEnd: a position past where the stream
// ends (kept by a client across a wiped state dir) is refused, saying
// where the stream ends and how to resume. It was accepted and answered
// with a ready line at that position, and every entry stored after, at a
// lower sequence, was skipped as sent already.
func TestEventsRefusePositionPastTheEnd(t *testing.T) {
	d := startDaemon(t)
	d.write(sid1, testenv.Header(sid1), testenv.Entry("e0", "", "first"))
	d.waitEntries(sid1, 1)

	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", d.http.URL+"/api/events?format=ndjson&after=PI_LOCAL:99999999", nil)
	resp, err := viewClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusConflict || resp.Header.Get("Content-Type") != "application/json" {
		line, _ := bufio.NewReader(resp.Body).ReadString('\n')
		t.Fatalf("a position past the end: %d %s, first line %q; want 409 with a JSON error", resp.StatusCode, resp.Header.Get("Content-Type"), line)
	}
	var e resumeError
	if err := json.NewDecoder(resp.Body).Decode(&e); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"PI_LOCAL:99999999", "past the end", "ends at PI_LOCAL:", "another store", "after=PI_LOCAL:0"} {
		if !strings.Contains(e.Error, want) {
			t.Errorf("error %q does not say %q", e.Error, want)
		}
	}
	if !strings.HasPrefix(e.End, "PI_LOCAL:") || e.End == "PI_LOCAL:0" {
		t.Errorf("end %q", e.End)
	}
}

// TestEventsReadyLineSaysSo: the first NDJSON line, which has no event
// name, says it is the ready line; it was a bare {"pos"}.
func TestEventsReadyLineSaysSo(t *testing.T) {
	d := startDaemon(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for _, q := range []string{"", "&after=PI_LOCAL:0"} {
		req, _ := http.NewRequestWithContext(ctx, "GET", d.http.URL+"/api/events?format=ndjson"+q, nil)
		resp, err := viewClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		line, err := bufio.NewReader(resp.Body).ReadString('\n')
		resp.Body.Close()
		if err != nil {
			t.Fatal(err)
		}
		var r map[string]any
		if err := json.Unmarshal([]byte(line), &r); err != nil {
			t.Fatal(err)
		}
		if r["ready"] != true || r["pos"] == nil {
			t.Errorf("query %q: first line %q, want {\"ready\":true,\"pos\":…}", q, line)
		}
	}
}
