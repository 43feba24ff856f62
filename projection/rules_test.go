package projection

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/pisyncd/pisyncd/session"
)

// editLine is a context_edit entry (only pi >= 0.86 writes one) that
// replaces the content of target: the seed rules ignore it, pi-1.6 applies
// it, so the two sets give different contexts.
func editLine(id, parent, target string) string {
	return fmt.Sprintf(`{"type":"context_edit","id":%q,"parentId":%q,"timestamp":"2026-11-29T23:08:19.000Z","targetId":%q,"replacement":{"content":"edited"}}`, id, parent, target)
}

// rulesContext is the file's context under mode, as /context prints it.
func rulesContext(t *testing.T, data []byte, mode session.RuleSet) string {
	t.Helper()
	f, err := session.LoadRules(data, mode)
	if err != nil {
		t.Fatal(err)
	}
	c, err := f.Context()
	if err != nil {
		t.Fatal(err)
	}
	b, err := session.ReportJSON(c, mode)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestRulesViews: the ctx view and the catalog entry name the rule set
// they were computed with; under auto a session turns pi-1.6 when a line
// only pi >= 0.86 writes arrives; /context takes ?rules= for one query and
// says which set it used; a worker restarted under another PISYNC_RULES
// recomputes every session's views without any new event, and a restart
// under the same set recomputes nothing.
func TestRulesViews(t *testing.T) {
	root, state := t.TempDir(), t.TempDir()
	sidOld, sidNew := "0199dddd-0000-7000-8000-000000000001", "0199dddd-0000-7000-8000-000000000002"
	pathOld := filepath.Join(root, "--r--", "2026-11-29T23-08-16-463Z_"+sidOld+".jsonl")
	pathNew := filepath.Join(root, "--r--", "2026-11-29T23-08-16-463Z_"+sidNew+".jsonl")
	old := header(sidOld) + "\n" + entry("u1", "", "hello") + "\n" + assistant("a1", "u1", 10) + "\n"
	newer := strings.Replace(old, sidOld, sidNew, 1) + editLine("x1", "a1", "u1") + "\n"
	writeFile(t, pathOld, []byte(old))
	writeFile(t, pathNew, []byte(newer))
	if rulesContext(t, []byte(newer), session.RulesSeed) == rulesContext(t, []byte(newer), session.RulesPi16) {
		t.Fatal("the fixture gives one context under both rule sets: it tests nothing")
	}

	n := startNode(t, root, state) // Options.Rules zero: auto
	views := func(sid, want string) {
		t.Helper()
		waitFor(t, 20*time.Second, func() (bool, string) {
			var cv ContextView
			var cat CatalogEntry
			n.kvGet(sessionKey(sid, "ctx"), &cv)
			n.kvGet(sessionKey(sid, "cat"), &cat)
			mem := ""
			if c, _ := n.worker.Catalog(context.Background()); len(c) > 0 {
				for _, e := range c {
					if e.SessionID == sid {
						mem = e.Rules
					}
				}
			}
			return cv.Rules == want && cat.Rules == want && mem == want,
				fmt.Sprintf("%s: ctx view rules %q, catalog entry %q, catalog in memory %q; want %q", sid, cv.Rules, cat.Rules, mem, want)
		})
	}
	views(sidOld, "seed")
	views(sidNew, "pi-1.6")
	n.waitContext(sidNew, fileContext(t, []byte(newer)))

	// /context: the worker's set (auto), then another one for one query.
	get := func(query string) (int, string) {
		rec := httptest.NewRecorder()
		n.worker.Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/context?"+query, nil))
		return rec.Code, strings.TrimSpace(rec.Body.String())
	}
	for _, tc := range []struct {
		query string
		mode  session.RuleSet
	}{
		{"session=" + sidNew, session.RulesAuto},
		{"session=" + sidNew + "&rules=seed", session.RulesSeed},
		{"session=" + sidNew + "&rules=pi-1.6", session.RulesPi16},
		{"session=" + sidOld + "&rules=auto", session.RulesAuto},
		{"session=" + sidOld + "&rules=pi-1.6", session.RulesPi16},
	} {
		data := newer
		if strings.Contains(tc.query, sidOld) {
			data = old
		}
		code, body := get(tc.query)
		if want := rulesContext(t, []byte(data), tc.mode); code != http.StatusOK || body != want {
			t.Errorf("/context?%s: %d\n got %.300s\nwant %.300s", tc.query, code, body, want)
		}
	}
	var head struct{ Rules, RulesMode string }
	if _, body := get("session=" + sidOld); json.Unmarshal([]byte(body), &head) != nil || head.Rules != "seed" || head.RulesMode != "auto" {
		t.Errorf("/context of the seed session: %.200s", body)
	}
	if code, body := get("session=" + sidNew + "&rules=1.6"); code != http.StatusBadRequest || !strings.Contains(body, "want auto, seed or pi-1.6") {
		t.Errorf("bad rules: %d %s", code, body)
	}
	// The query's set did not stick: the views and the next context keep auto.
	views(sidNew, "pi-1.6")
	n.waitContext(sidNew, fileContext(t, []byte(newer)))

	// Auto changes its mind when the first 1.x line arrives.
	appendFile(t, pathOld, editLine("x1", "a1", "u1")+"\n")
	views(sidOld, "pi-1.6")
	n.waitContext(sidOld, fileContext(t, []byte(old+editLine("x1", "a1", "u1")+"\n")))

	// A restart under PISYNC_RULES=seed: no event arrives, every view follows.
	n.stopWorker()
	n.rules = session.RulesSeed
	n.startWorker()
	views(sidOld, "seed")
	views(sidNew, "seed")
	if got, want := n.contextJSON(sidNew), fileContextRules(t, []byte(newer), session.RulesSeed); got != want {
		t.Errorf("context under seed:\n got %.300s\nwant %.300s", got, want)
	}
	if st := n.worker.Stats(); st.Applied != 0 {
		t.Errorf("restart applied %d events", st.Applied)
	}
	// Again under the same set: the views stand, nothing is written.
	n.stopWorker()
	n.startWorker()
	select {
	case <-n.worker.reprojected:
	case <-time.After(20 * time.Second):
		t.Fatal("the rule set check did not end")
	}
	views(sidNew, "seed")
	if st := n.worker.Stats(); st.Applied != 0 || st.Writes != 0 {
		t.Errorf("restart under the same rule set: %+v", st)
	}
}

func fileContextRules(t *testing.T, data []byte, mode session.RuleSet) string {
	t.Helper()
	f, err := session.LoadRules(data, mode)
	if err != nil {
		t.Fatal(err)
	}
	c, err := f.Context()
	if err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(c)
	return string(b)
}
