package search

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/blevesearch/bleve/v2"
	"github.com/blevesearch/bleve/v2/analysis/analyzer/custom"
	"github.com/blevesearch/bleve/v2/analysis/token/lowercase"
	"github.com/blevesearch/bleve/v2/analysis/tokenizer/unicode"
	"github.com/blevesearch/bleve/v2/index/scorch"
	"github.com/blevesearch/bleve/v2/mapping"
)

// Format is the index's format version, kept in the index. An index of
// another version is rebuilt from the streams: bump it whenever Extract,
// the mapping or the analyzer changes what a document holds.
const Format = "3"

const (
	keyFormat = "pisyncd.format"
	keyPos    = "pisyncd.pos." // + stream name
)

// Index is the on-disk full-text index. Safe for concurrent use.
type Index struct {
	dir string
	// mu guards idx against Reset; bleve serves concurrent calls itself.
	mu     sync.RWMutex
	idx    bleve.Index
	closed bool
	trim   *trimmer
	// phraseBudget is PhraseBudget (a test shortens it).
	phraseBudget time.Duration
	// Rebuilt says the index was made afresh when opened (missing,
	// unreadable or of another format): the worker reads the streams
	// from their start.
	Rebuilt bool
	// Why says why it was rebuilt ("" when it was not, or was missing).
	Why string
	// broken says a write failed (a full disk) or bleve panicked: after a
	// failed persist, bleve closes a segment its snapshot still uses, and
	// the next read of it panics. The index is opened again from its
	// files before its next use (repair): they hold the last batch that
	// was written whole, positions included. The methods that write mark
	// it on any error (runlockWrite), an erase's merge included.
	broken atomic.Bool
	// suspect is signalled when the index reports a failure: the worker
	// then checks its files (verify.go).
	suspect chan struct{}
}

// Suspect returns a channel that receives when the index has failed since
// it was last received from: a panic, an error of a search, a write or
// scorch's merger. Most are a full disk or a search cut short; a damaged
// segment file is among them, and Damage tells which.
func (ix *Index) Suspect() <-chan struct{} { return ix.suspect }

func (ix *Index) failed() {
	select {
	case ix.suspect <- struct{}{}:
	default:
	}
}

// rlock repairs a broken index, then holds ix.mu for reading. A method
// that uses idx defers runlock right after it.
func (ix *Index) rlock() error {
	if err := ix.repair(); err != nil {
		return err
	}
	ix.mu.RLock()
	return nil
}

// runlock releases ix.mu and turns a panic in bleve into *err, marking the
// index broken. It must be the deferred call itself (recover).
func (ix *Index) runlock(err *error) {
	if r := recover(); r != nil {
		ix.panicked(err, r)
	}
	ix.mu.RUnlock()
}

// runlockWrite is runlock for a method that writes: any error of its also
// marks the index broken (bleve's state after a failed write: broken).
func (ix *Index) runlockWrite(err *error) {
	if r := recover(); r != nil {
		ix.panicked(err, r)
	} else if *err != nil {
		ix.broken.Store(true)
		ix.failed()
	}
	ix.mu.RUnlock()
}

func (ix *Index) panicked(err *error, r any) {
	ix.broken.Store(true)
	ix.failed()
	*err = fmt.Errorf("search: the index failed (%v); it is opened again from its files", r)
}

// repair opens a broken index again from its files.
func (ix *Index) repair() error {
	if !ix.broken.Load() {
		return nil
	}
	ix.mu.Lock()
	defer ix.mu.Unlock()
	if !ix.broken.Load() || ix.closed {
		return nil
	}
	_ = ix.closeIdx() // its state is what failed
	idx, err := ix.trim.withEvents(func(config map[string]any) (bleve.Index, error) {
		return bleve.OpenUsing(ix.dir, config)
	})
	if errors.Is(err, bleve.ErrorIndexPathDoesNotExist) {
		// A Reset that removed it and could not make it again.
		if idx, err = create(ix.dir, ix.trim); err == nil {
			ix.Rebuilt = true
		}
	}
	if err != nil {
		// ix.idx stays closed (its calls fail); the next use tries again.
		return fmt.Errorf("search: open the index again after a failed write: %w", err)
	}
	ix.idx = idx
	ix.broken.Store(false)
	return nil
}

// Open opens the index in dir (created 0700), making it afresh when it is
// missing, cannot be opened or is of another Format.
func Open(dir string) (*Index, error) {
	if err := registerParts(); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(filepath.Dir(dir), 0o700); err != nil {
		return nil, fmt.Errorf("search: open %s: %w", dir, err)
	}
	ix := &Index{dir: dir, phraseBudget: PhraseBudget, trim: newTrimmer(), suspect: make(chan struct{}, 1)}
	ix.trim.failed = ix.failed
	if _, err := os.Stat(dir); err == nil {
		idx, err := ix.trim.withEvents(func(config map[string]any) (bleve.Index, error) {
			return bleve.OpenUsing(dir, config)
		})
		if err == nil {
			v, verr := idx.GetInternal([]byte(keyFormat))
			if verr == nil && string(v) == Format {
				ix.idx = idx
				ix.trim.start(ix.trimMapped)
				return ix, nil
			}
			idx.Close()
			ix.Why = fmt.Sprintf("format %q, want %q", v, Format)
			if verr != nil {
				ix.Why = verr.Error()
			}
		} else {
			ix.Why = err.Error()
		}
		if err := os.RemoveAll(dir); err != nil {
			return nil, fmt.Errorf("search: remove the old index: %w", err)
		}
	}
	idx, err := create(dir, ix.trim)
	if err != nil {
		return nil, err
	}
	ix.idx, ix.Rebuilt = idx, true
	ix.trim.start(ix.trimMapped)
	return ix, nil
}

func create(dir string, t *trimmer) (bleve.Index, error) {
	idx, err := t.withEvents(func(config map[string]any) (bleve.Index, error) {
		return bleve.NewUsing(dir, newMapping(), scorch.Name, scorch.Name, config)
	})
	if err != nil {
		return nil, fmt.Errorf("search: create %s: %w", dir, err)
	}
	if err := idx.SetInternal([]byte(keyFormat), []byte(Format)); err != nil {
		idx.Close()
		return nil, fmt.Errorf("search: create %s: %w", dir, err)
	}
	// bleve writes index_meta.json 0666 (less the umask); it holds no
	// text, but every file of the index is the owner's alone.
	os.Chmod(filepath.Join(dir, "index_meta.json"), 0o600)
	os.Chmod(dir, 0o700)
	return idx, nil
}

// Reset empties the index: its documents were read from streams that are
// no longer there (a position past a stream's end: the store was made
// afresh under the index).
func (ix *Index) Reset(why string) error {
	ix.mu.Lock()
	defer ix.mu.Unlock()
	if err := ix.closeIdx(); err != nil {
		return fmt.Errorf("search: reset: %w", err)
	}
	// From here ix.idx is closed: until a new one is made, the index is
	// broken, and its next use makes it (repair).
	ix.broken.Store(true)
	if err := os.RemoveAll(ix.dir); err != nil {
		return fmt.Errorf("search: reset: %w", err)
	}
	idx, err := create(ix.dir, ix.trim)
	if err != nil {
		return err
	}
	ix.idx, ix.Rebuilt, ix.Why = idx, true, why
	ix.broken.Store(false)
	return nil
}

// Close closes the index.
func (ix *Index) Close() error {
	// The trimmer takes ix.mu itself: it is stopped before.
	ix.trim.stop()
	ix.mu.Lock()
	defer ix.mu.Unlock()
	if ix.closed {
		return nil // bleve panics on a second Close
	}
	ix.closed = true
	if err := ix.closeIdx(); err != nil {
		return fmt.Errorf("search: close: %w", err)
	}
	return nil
}

// closeIdx closes idx; ix.mu is held. A broken index's Close may panic,
// or find it closed by a repair that could not open it again: neither is
// an error, the index is done with.
func (ix *Index) closeIdx() (err error) {
	broken := ix.broken.Load()
	defer func() {
		if r := recover(); r != nil && !broken {
			err = fmt.Errorf("%v", r)
		}
	}()
	if err := ix.idx.Close(); err != nil && !broken {
		return err
	}
	return nil
}

const analyzerName = "pitext"

func newMapping() mapping.IndexMapping {
	if err := registerParts(); err != nil {
		panic(err) // only a second filter of that name in this process
	}
	im := bleve.NewIndexMapping()
	if err := addJoinSpaces(im); err != nil {
		panic(err) // a constant mapping
	}
	// Words are Unicode word segments, lower-cased; no stemming and no stop
	// words: sessions are code and commands as much as prose, and "is" or
	// "go" are worth finding there. Queries are analyzed so; the text is
	// indexed with the parts of joined words besides (parts.go).
	if err := im.AddCustomAnalyzer(analyzerName, map[string]any{
		"type":          custom.Name,
		"char_filters":  []string{joinSpacesName},
		"tokenizer":     unicode.Name,
		"token_filters": []string{lowercase.Name, invisibleFilterName},
	}); err != nil {
		panic(err) // a constant mapping
	}
	if err := im.AddCustomAnalyzer(indexAnalyzerName, map[string]any{
		"type":          custom.Name,
		"char_filters":  []string{joinSpacesName},
		"tokenizer":     unicode.Name,
		"token_filters": []string{partsFilterName, lowercase.Name, invisibleFilterName},
	}); err != nil {
		panic(err) // a constant mapping
	}
	im.DefaultAnalyzer = analyzerName
	im.IndexDynamic, im.StoreDynamic, im.DocValuesDynamic = false, false, false
	dm := bleve.NewDocumentStaticMapping()
	kw := func(store bool) *mapping.FieldMapping {
		f := bleve.NewKeywordFieldMapping()
		f.Store, f.IncludeInAll, f.DocValues, f.IncludeTermVectors = store, false, false, false
		return f
	}
	stored := func() *mapping.FieldMapping {
		f := bleve.NewTextFieldMapping()
		f.Index, f.Store, f.IncludeInAll, f.DocValues, f.IncludeTermVectors = false, true, false, false, false
		return f
	}
	text := bleve.NewTextFieldMapping()
	text.Analyzer = indexAnalyzerName
	// Term vectors give phrase matching and the hit locations snippets
	// are cut around.
	text.Store, text.IncludeTermVectors, text.IncludeInAll, text.DocValues = true, true, false, false
	dm.AddFieldMappingsAt("sessionId", kw(true))
	dm.AddFieldMappingsAt("node", kw(true))
	dm.AddFieldMappingsAt("type", kw(true))
	dm.AddFieldMappingsAt("role", kw(true))
	dm.AddFieldMappingsAt("entryId", stored())
	dm.AddFieldMappingsAt("timestamp", stored())
	dm.AddFieldMappingsAt("text", text)
	im.DefaultMapping = dm
	return im
}

// Position returns the last sequence of stream indexed.
func (ix *Index) Position(stream string) (_ uint64, err error) {
	if err := ix.rlock(); err != nil {
		return 0, err
	}
	defer ix.runlock(&err)
	v, err := ix.idx.GetInternal([]byte(keyPos + stream))
	if err != nil {
		return 0, fmt.Errorf("search: position of %s: %w", stream, err)
	}
	if v == nil {
		return 0, nil
	}
	n, err := strconv.ParseUint(string(v), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("search: position of %s: %w", stream, err)
	}
	return n, nil
}

// Write indexes docs and records stream's position pos in one batch: a
// restart resumes after pos with exactly these documents in the index.
// pos 0 leaves the position as it is.
func (ix *Index) Write(docs []Doc, stream string, pos uint64) (err error) {
	if err := ix.rlock(); err != nil {
		return err
	}
	defer ix.runlockWrite(&err)
	ix.trim.enter()
	defer ix.trim.exit()
	b := ix.idx.NewBatch()
	for i := range docs {
		d := &docs[i]
		if err := b.Index(docID(d.SessionID, d.EntryID), d); err != nil {
			return fmt.Errorf("search: index %s/%s: %w", d.SessionID, d.EntryID, err)
		}
	}
	if pos > 0 {
		b.SetInternal([]byte(keyPos+stream), []byte(strconv.FormatUint(pos, 10)))
	}
	if b.Size() == 0 {
		return nil
	}
	if err := ix.idx.Batch(b); err != nil {
		return fmt.Errorf("search: write a batch of %d: %w", len(docs), err)
	}
	return nil
}

// EraseSession removes every document of the session, and then merges the
// index's segments into one: a deleted document stays in its segment file
// until that segment is merged, and an erase must leave no file holding the
// session's text. The merge rewrites the whole index (an erase is rare;
// docs/SECURITY.md says what it costs and what it does not cover). It
// merges when it finds no document too: an erase carried out again after
// a crash (resumeErases) finds the deletions of the first attempt saved
// and its merge perhaps not done, the text still in a segment. (A probe
// on 2026-12-06 left a session's text in a segment for good that way.)
func (ix *Index) EraseSession(ctx context.Context, sid string) (_ int, err error) {
	if err := ix.rlock(); err != nil {
		return 0, err
	}
	defer ix.runlockWrite(&err)
	ix.trim.enter()
	defer ix.trim.exit()
	n, err := ix.deleteSession(ctx, sid)
	if err != nil {
		return n, err
	}
	if err := ix.compact(ctx); err != nil {
		return n, fmt.Errorf("search: erase %s: %w", sid, err)
	}
	return n, nil
}

// compact rewrites the index into segments without deleted documents, and
// waits until the files it replaced are removed.
func (ix *Index) compact(ctx context.Context) error {
	adv, err := ix.idx.Advanced()
	if err != nil {
		return err
	}
	sc, ok := adv.(*scorch.Scorch)
	if !ok {
		return fmt.Errorf("the index is not scorch (%T)", adv)
	}
	for attempt := 0; ; attempt++ {
		// A lone segment holding deleted documents is left as it is by
		// a forced merge: a marker document makes a second one. The
		// marker holds no text; its own deletion may stay.
		if err := ix.idx.Index(compactMarker, Doc{Type: compactMarker}); err != nil {
			return err
		}
		if err := forceMerge(ctx, sc); err != nil {
			return fmt.Errorf("merge: %w", err)
		}
		if err := ix.idx.Delete(compactMarker); err != nil {
			return err
		}
		// A merge the merger began before the deletes may have been
		// introduced after them, with the deleted documents in it.
		dirty, err := holdsDeleted(sc)
		if err != nil {
			return err
		}
		if !dirty {
			break
		}
		if attempt == 10 {
			return errors.New("deleted documents remain after 10 merges")
		}
	}
	// The persister removes replaced files after it persists a snapshot,
	// once no reader holds them: each write here is persisted and lets
	// it run again, until only the live segments' files are left.
	for i := 0; ; i++ {
		if err := ix.idx.SetInternal([]byte("pisyncd.compacted"), []byte(strconv.FormatInt(time.Now().UnixNano(), 10))); err != nil {
			return err
		}
		stale, err := ix.staleFiles(sc)
		if err != nil || len(stale) == 0 {
			return err
		}
		if i == 100 {
			return fmt.Errorf("replaced files still there: %v", stale)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// forceMerge merges the index's segments into one, or returns when ctx
// ends. scorch's ForceMerge heeds no context and, when the merge fails,
// waits until the index is closed (its merger retries the merge): the
// worker ends an erase that way when it finds the index damaged, and
// closes the index to make it again, which ends the call left behind.
func forceMerge(ctx context.Context, sc *scorch.Scorch) error {
	done := make(chan error, 1)
	go func() { done <- sc.ForceMerge(ctx, nil) }()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// staleFiles are the segment files in the index's directory that no live
// segment is read from.
func (ix *Index) staleFiles(sc *scorch.Scorch) ([]string, error) {
	r, err := sc.Reader()
	if err != nil {
		return nil, err
	}
	defer r.Close()
	snap, ok := r.(*scorch.IndexSnapshot)
	if !ok {
		return nil, fmt.Errorf("unexpected reader %T", r)
	}
	live := map[string]bool{}
	for _, seg := range snap.Segments() {
		if p, ok := seg.Segment().(interface{ Path() string }); ok {
			live[filepath.Base(p.Path())] = true
		}
	}
	ents, err := os.ReadDir(filepath.Join(ix.dir, "store"))
	if err != nil {
		return nil, err
	}
	var stale []string
	for _, e := range ents {
		if filepath.Ext(e.Name()) == ".zap" && !live[e.Name()] {
			stale = append(stale, e.Name())
		}
	}
	return stale, nil
}

const compactMarker = "pisyncd.compact"

// holdsDeleted reports whether a segment of the index holds a deleted
// document other than the compaction marker.
func holdsDeleted(sc *scorch.Scorch) (bool, error) {
	r, err := sc.Reader()
	if err != nil {
		return false, err
	}
	defer r.Close()
	snap, ok := r.(*scorch.IndexSnapshot)
	if !ok {
		return false, fmt.Errorf("unexpected reader %T", r)
	}
	for _, seg := range snap.Segments() {
		del := seg.Deleted()
		if del == nil {
			continue
		}
		it := del.Iterator()
		for it.HasNext() {
			id, err := seg.DocID(uint64(it.Next()))
			if err != nil {
				return false, err
			}
			if string(id) != compactMarker {
				return true, nil
			}
		}
	}
	return false, nil
}

func (ix *Index) deleteSession(ctx context.Context, sid string) (int, error) {
	n := 0
	for {
		q := bleve.NewTermQuery(sid)
		q.SetField("sessionId")
		req := bleve.NewSearchRequestOptions(q, 1000, 0, false)
		res, err := ix.idx.SearchInContext(ctx, req)
		if err != nil {
			return n, fmt.Errorf("search: erase %s: %w", sid, err)
		}
		if len(res.Hits) == 0 {
			return n, nil
		}
		b := ix.idx.NewBatch()
		for _, h := range res.Hits {
			b.Delete(h.ID)
		}
		if err := ix.idx.Batch(b); err != nil {
			return n, fmt.Errorf("search: erase %s: %w", sid, err)
		}
		n += len(res.Hits)
	}
}

// DocCount is the number of documents indexed.
func (ix *Index) DocCount() (_ uint64, err error) {
	if err := ix.rlock(); err != nil {
		return 0, err
	}
	defer ix.runlock(&err)
	n, err := ix.idx.DocCount()
	if err != nil {
		return 0, fmt.Errorf("search: count: %w", err)
	}
	return n, nil
}

// DiskBytes is the size of the index's files.
func (ix *Index) DiskBytes() int64 {
	var n int64
	filepath.WalkDir(ix.dir, func(_ string, d fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil // a segment merged away meanwhile
			}
			return nil
		}
		if info, err := d.Info(); err == nil && d.Type().IsRegular() {
			n += info.Size()
		}
		return nil
	})
	return n
}
