package web

import (
	"context"
	"errors"
	"io"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/pisyncd/pisyncd/projection"
	"github.com/pisyncd/pisyncd/session"
)

// fillingSource is a one-session catalog whose first message is still
// being read back (as after a daemon's start) until fill is called.
type fillingSource struct {
	mu     sync.Mutex
	filled bool
}

const fillingFirst = "the first message, read back"

func (f *fillingSource) fill() { f.mu.Lock(); f.filled = true; f.mu.Unlock() }

func (f *fillingSource) FillingFirstMessages() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return !f.filled
}

func (f *fillingSource) Catalog(context.Context) ([]projection.CatalogEntry, error) {
	c := projection.CatalogEntry{SessionID: "44444444-0000-4000-8000-000000000000", Cwd: "/home/u/p", Nodes: []string{testNode}, Entries: 2, UpdatedMs: 1.7e12}
	if !f.FillingFirstMessages() {
		c.FirstMessage = fillingFirst
	}
	return []projection.CatalogEntry{c}, nil
}

func (f *fillingSource) Snapshot(context.Context, string, int64) (*projection.Snapshot, error) {
	return nil, errors.New("not in this test")
}

func (f *fillingSource) WriteContext(context.Context, io.Writer, string, string, session.RuleSet) error {
	return errors.New("not in this test")
}

func (f *fillingSource) Tail(ctx context.Context, _ projection.TailOptions, _ func(projection.TailEntry) error) error {
	<-ctx.Done() // no entry comes: only the filling flag can bring the list again
	return nil
}

func (f *fillingSource) Positions(context.Context) (projection.Src, error) {
	return projection.Src{}, nil
}

// TestBrowserListFillsFirstMessages: a list drawn while the daemon still
// reads the first messages back (a start) asks again until they are all
// there, with no entry to prompt it (it used to show them only at the
// next refresh).
func TestBrowserListFillsFirstMessages(t *testing.T) {
	b := newBrowser(t)
	src := &fillingSource{}
	s, err := New(Options{Token: testToken, Source: src, Node: testNode})
	if err != nil {
		t.Fatal(err)
	}
	h := httptest.NewServer(s)
	t.Cleanup(func() { closeServer(h) })
	b.do(t, chromedp.Navigate(viewLink(h.URL+"/")))
	b.waitJS(t, 20*time.Second, `document.body.dataset.ready === '1' && document.querySelectorAll('#list .row').length === 1`)
	// Not "(no messages)": it is on its way.
	if got := eval[string](t, b, `document.querySelector('#list .row .first').textContent`); got != "…" {
		t.Fatalf("first message %q while it is read back", got)
	}
	src.fill()
	b.waitJS(t, 10*time.Second, `document.querySelector('#list .row .first').textContent === `+"'"+fillingFirst+"'")
}

func (s *fillingSource) ErasedBelow(string) projection.Src { return nil }
