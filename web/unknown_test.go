package web

import (
	"net/http"
	"strings"
	"testing"

	"github.com/pisyncd/pisyncd/internal/testenv"
)

// TestUnknownSessionIsNotFound: every API address of a session no stream
// holds answers 404 naming it (the page, a static shell, shows that
// answer); one the streams hold answers as before. (Before, the session
// and its tree answered 200, empty: a stream info's subject filter
// narrows only its list of subjects, not its count of messages.)
func TestUnknownSessionIsNotFound(t *testing.T) {
	d := startDaemon(t)
	d.write(sid1, testenv.Header(sid1), testenv.Entry("u1", "", "hello"))
	d.waitEntries(sid1, 1)
	const unknown = "0198c0de-dead-7000-8000-00000000beef"
	for _, p := range []string{"/api/s/", "/api/s/%s/tree", "/api/s/%s/context", "/api/s/%s/branch?leaf=u1"} {
		path := strings.Replace(p, "%s", unknown, 1)
		if !strings.Contains(p, "%s") {
			path = p + unknown
		}
		resp, body := d.get(path)
		if resp.StatusCode != http.StatusNotFound || !strings.Contains(body, unknown) {
			t.Errorf("%s: %d %.200q, want 404 naming the session", path, resp.StatusCode, body)
		}
		known := strings.Replace(path, unknown, sid1, 1)
		if resp, body := d.get(known); resp.StatusCode != http.StatusOK {
			t.Errorf("%s: %d %.200q, want 200", known, resp.StatusCode, body)
		}
	}
}
