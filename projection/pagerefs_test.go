package projection

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/pisyncd/pisyncd/eventlog"
)

// TestPageRefsAreThePagesEntries: a context page's refs are the refs of
// the very window entries whose ids it holds. A model change early in the
// window yields no messages and so has no ref: paged by their own index,
// the refs ran one ahead of the ids from there on, and each page's last
// ref named the next page's first entry. A second model change near a
// page boundary shifts them once more.
func TestPageRefsAreThePagesEntries(t *testing.T) {
	root := t.TempDir()
	sid := "0199cccc-0000-7000-8000-000000000002"
	const n = 2*pageSize + 100
	var b bytes.Buffer
	b.WriteString(header(sid) + "\n")
	parent := ""
	for i := range n {
		id := fmt.Sprintf("e%07d", i)
		if i == 1 || i == pageSize+pageSize/2 {
			mc := fmt.Sprintf(`{"type":"model_change","id":"m%07d","parentId":%q,"timestamp":"2026-11-29T23:09:17.000Z","provider":"anthropic","modelId":"claude-%d"}`, i, parent, i)
			b.WriteString(mc + "\n")
			parent = fmt.Sprintf("m%07d", i)
		}
		b.WriteString(entry(id, parent, fmt.Sprintf("message %d", i)) + "\n")
		parent = id
	}
	data := b.Bytes()
	writeFile(t, filepath.Join(root, "--pages--", "2026-11-29T23-08-16-463Z_"+sid+".jsonl"), data)
	nd := startNode(t, root, t.TempDir())
	nd.waitContext(sid, fileContext(t, data))
	var cv ContextView
	waitFor(t, 30*time.Second, func() (bool, string) {
		nd.kvGet(sessionKey(sid, "ctx"), &cv)
		return cv.Entries == n+2, fmt.Sprintf("ctx view: %d entries", cv.Entries)
	})
	if cv.Pages != 3 || cv.Refs != n {
		t.Fatalf("ctx view: %d pages, %d refs; want 3 pages, %d refs", cv.Pages, cv.Refs, n)
	}

	// What each stream sequence holds, by its Pi-Id.
	idAt := map[string]string{}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for seq := uint64(1); ; {
		before := len(idAt)
		err := directGet(ctx, nd.nc, eventlog.LocalStream, eventlog.LocalSubject(testNode, sid), seq, firstBatch, firstBatchBytes, func(m *nats.Msg, s uint64) {
			idAt[fmt.Sprintf("L:%d", s)] = m.Header.Get(eventlog.HdrID)
			seq = s + 1
		})
		if err != nil {
			t.Fatal(err)
		}
		if len(idAt) == before {
			break
		}
	}

	for p := range cv.Pages {
		var pg ContextPage
		if !nd.kvGet(pageKey(sid, p), &pg) {
			t.Fatalf("page %d missing", p)
		}
		// The refs the page's ids call for: every id but a model change's.
		var want, got []string
		for _, raw := range pg.IDs {
			var id string
			if err := json.Unmarshal(raw, &id); err != nil {
				t.Fatal(err)
			}
			if id[0] == 'e' {
				want = append(want, id)
			}
		}
		for _, ref := range pg.Refs {
			got = append(got, idAt[ref])
		}
		if !slices.Equal(got, want) {
			i := 0
			for i < min(len(got), len(want)) && got[i] == want[i] {
				i++
			}
			t.Errorf("page %d: %d refs name %d entries of its ids; first difference at %d: ref names %q, want %q",
				p, len(got), len(want), i, at(got, i), at(want, i))
		}
	}
}

func at(xs []string, i int) string {
	if i < len(xs) {
		return xs[i]
	}
	return "(none)"
}
