package replicate

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/pisyncd/pisyncd/eventlog"
)

// Erasing a session (`pisyncd erase`, for a leaked secret) removes it from
// every machine: its files here, unlinked (not trashed: the point is that
// the text goes), any copy in the trash folders, and every line of it in
// the streams. The machine where the user asks publishes an erase event;
// the others apply it here, in the replicator's read of PI_ALL.

// SessionFiles finds the files under root that hold session sid, by their
// header: files (live) where pi lists sessions, and copies (trash) in the
// replicator's trash folders and staging files left by a crash, which pi
// does not list but which hold the same lines. It follows the links pi
// follows (a project folder directly in root). Reading every file's first
// line is the truth: a copy may have any name. A file without a header
// named after the session is live too: pi's lines after its file went.
func SessionFiles(root, sid string) (live, trash []string, err error) {
	root = filepath.Clean(root)
	var walk func(dir string, depth int, inTrash bool) error
	walk = func(dir string, depth int, inTrash bool) error {
		ents, err := os.ReadDir(dir)
		if errors.Is(err, fs.ErrNotExist) || errors.Is(err, fs.ErrPermission) {
			return nil // gone meanwhile, or not ours to read (the tailer skips it too)
		}
		if err != nil {
			return fmt.Errorf("replicate: find files of %s: %w", sid, err)
		}
		for _, de := range ents {
			p := filepath.Join(dir, de.Name())
			hidden := strings.HasPrefix(de.Name(), ".")
			isDir := de.IsDir()
			if de.Type()&fs.ModeSymlink != 0 && depth == 0 && !hidden {
				// A linked project folder, as pi and the tailer follow it.
				if st, err := os.Stat(p); err == nil && st.IsDir() {
					isDir = true
				}
			}
			switch {
			case isDir && de.Name() == TrashDir:
				if err := walk(p, depth+1, true); err != nil {
					return err
				}
			case isDir && !hidden:
				if err := walk(p, depth+1, inTrash); err != nil {
					return err
				}
			case !de.Type().IsRegular():
			case inTrash || staging(de.Name()):
				if id, ok := firstHeaderID(p); ok && id == sid {
					trash = append(trash, p)
				}
			case !hidden && strings.HasSuffix(de.Name(), ".jsonl"):
				// Or a file without a header named after the session: a
				// pi that had the session open when its file went (an
				// erase while pi writes) makes one at its next line,
				// holding that line alone.
				if id, ok := firstHeaderID(p); ok && id == sid || !ok && strings.Contains(de.Name(), sid) {
					live = append(live, p)
				}
			}
		}
		return nil
	}
	err = walk(root, 0, false)
	return live, trash, err
}

// holdKey is the state key of a session erased here whose erase event has
// not come back from the hub yet: until it has, nothing of the session is
// written into a file here, whatever PI_ALL still delivers (lines that
// other machines wrote before they applied the erase, or lines copied
// again after a restart).
func holdKey(sid string) string { return SessionKey(holdPrefix, sid) }

const holdPrefix = "replicator.erasing."

// hold is a holdKey's value.
type hold struct {
	SID string `json:"sid"`
	// AllSeq is PI_ALL's last sequence when the erase began: the erase
	// event of this node that comes after it is the one that ends the hold.
	AllSeq uint64 `json:"allSeq"`
}

// RecordHold records in state that sid is being erased here, with PI_ALL
// (nil without one) as it is now. The replicator takes it up when it next
// starts; a running one is told through Replicator.Hold instead.
func RecordHold(ctx context.Context, state jetstream.KeyValue, all *eventlog.All, sid string) (uint64, error) {
	var allSeq uint64
	if all != nil {
		info, err := all.Stream().Info(ctx)
		if err != nil {
			return 0, fmt.Errorf("replicate: hold %s: %w", sid, err)
		}
		allSeq = info.State.LastSeq
	}
	b, _ := json.Marshal(hold{SID: sid, AllSeq: allSeq})
	if _, err := state.Put(ctx, holdKey(sid), b); err != nil {
		return 0, fmt.Errorf("replicate: hold %s: %w", sid, err)
	}
	return allSeq, nil
}

// Hold stops the replicator from writing anything of session sid into a
// file, before the caller removes its files to erase it; the hold ends
// when this node's erase event comes back in PI_ALL. Hold waits for a
// write round under way, so once it returns nothing of the session is
// written here any more.
func (r *Replicator) Hold(ctx context.Context, sid string) error {
	r.eraseMu.Lock()
	defer r.eraseMu.Unlock()
	if err := r.loadHolds(ctx); err != nil {
		return err
	}
	allSeq, err := RecordHold(ctx, r.state, r.all, sid)
	if err != nil {
		return err
	}
	r.holds[sid] = allSeq
	return nil
}

// loadHolds reads the holds recorded in the state bucket, once. The
// caller holds eraseMu.
func (r *Replicator) loadHolds(ctx context.Context) error {
	if r.holds != nil {
		return nil
	}
	holds := map[string]uint64{}
	err := readKeys(ctx, r.state, holdPrefix, func(_ string, v []byte) {
		var h hold
		if json.Unmarshal(v, &h) == nil {
			holds[h.SID] = h.AllSeq
		}
	})
	if err != nil {
		return fmt.Errorf("replicator: read erase holds: %w", err)
	}
	r.holds = holds
	return nil
}

// flushHeld is flush, run under eraseMu, after dropping what waits of
// sessions on hold: lines of a session erased here are never written.
func (r *Replicator) flushHeld(ctx context.Context) (durable bool, err error) {
	r.eraseMu.Lock()
	defer r.eraseMu.Unlock()
	if err := r.loadHolds(ctx); err != nil {
		return false, err
	}
	for sid := range r.holds {
		if s := r.sessions[sid]; s != nil && len(s.queue) > 0 {
			r.dropQueue(s)
		}
	}
	return r.flush(ctx), nil
}

// erase applies an erase event. From another node: every file of the
// session here goes (the tailer told first, so that no deletion is
// published and nothing is read again), copies in the trash too, and the
// session's lines in PI_LOCAL and PI_ALL before the event. From this node
// (the user erased it here, which removed the files and the lines then):
// what came into PI_ALL meanwhile goes, and the hold ends. Lines after
// the event are a new session and stay. Applied once: a replay (the read
// position saved before the event, say while a line waits for ever for a
// header) would otherwise erase what came after it, the session written
// again here or elsewhere, and this node's own lines of it.
func (r *Replicator) erase(ctx context.Context, s *sess, ev *eventlog.Event) error {
	own := ev.Node == r.opts.Node
	if own && ev.SrcSeq == 0 {
		return nil // the copy that keeps the downloader's place (eventlog.KeepPosition)
	}
	if done, err := r.eraseApplied(ctx, s.sid, ev.Seq); err != nil || done {
		return err
	}
	s.trashAfter = nil // an erase takes the file anyway
	live, trash, err := SessionFiles(r.opts.Root, s.sid)
	if err != nil {
		return err
	}
	if !own {
		for _, p := range r.tracker.FilesFor(s.sid) {
			if !slices.Contains(live, p) {
				live = append(live, p)
			}
		}
		if s.file != nil && !slices.Contains(live, s.file.path) {
			live = append(live, s.file.path)
		}
		if err := r.tracker.Remove(ctx, live); err != nil {
			return fmt.Errorf("replicator: erase %s: %w", s.sid, err)
		}
	}
	for _, p := range trash {
		if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("replicator: erase %s: %w", s.sid, err)
		}
	}
	bounds := eventlog.EraseBounds{All: ev.Seq}
	if own {
		bounds.Local = ev.SrcSeq // the lines this node published before it
	}
	n, err := eventlog.EraseSession(ctx, r.all.JetStream(), r.opts.Node, s.sid, bounds)
	if err != nil {
		return fmt.Errorf("replicator: erase %s: %w", s.sid, err)
	}
	if r.opts.Erased != nil && !own {
		if err := r.opts.Erased(s.sid, ev.Seq); err != nil {
			return fmt.Errorf("replicator: erase %s: %w", s.sid, err)
		}
	}
	if err := r.state.Delete(ctx, deletedKey(s.sid)); err != nil && !errors.Is(err, jetstream.ErrKeyNotFound) {
		return fmt.Errorf("replicator: erase %s: %w", s.sid, err)
	}
	if err := r.dropHeaderless(ctx, s.sid); err != nil {
		return fmt.Errorf("replicator: erase %s: %w", s.sid, err)
	}
	if err := r.dropQuarantine(ctx, s); err != nil {
		return fmt.Errorf("replicator: erase %s: %w", s.sid, err)
	}
	for _, p := range live {
		delete(r.files, p)
	}
	if s.file != nil {
		delete(r.files, s.file.path)
	}
	r.dropQueue(s)
	delete(r.sessions, s.sid)
	// Recorded once everything above is done: a crash before it applies
	// the event again, which finds nothing of the session's past left.
	if _, err := r.state.Put(ctx, erasedKey(s.sid), []byte(strconv.FormatUint(ev.Seq, 10))); err != nil {
		return fmt.Errorf("replicator: erase %s: record it: %w", s.sid, err)
	}
	if own {
		return r.endHold(ctx, s.sid, ev.Seq)
	}
	r.erasedRemote.Add(1)
	r.logger.Info("session erased on another machine; erased here", "session", s.sid, "node", ev.Node,
		"files", len(live), "trash", len(trash), "lines_local", n.Local, "lines_all", n.All)
	return nil
}

// passErased passes over the lines waiting in s, a session with neither a
// header nor a file here, when it was erased here. A machine that did not
// apply the erase (its PISYNC_TRUSTED_NODES leave out the node that
// erased) goes on writing the session, and its lines, whose header went
// with the erase, waited here for good: status said a session waited for
// a header, and nothing could end it. A session written again after its
// erase sends its header first, and is a new session here.
func (r *Replicator) passErased(ctx context.Context, s *sess) error {
	if len(s.queue) == 0 {
		return nil // a refill of a file that is gone: nothing waits
	}
	if !s.erasedRead {
		erased, err := r.eraseApplied(ctx, s.sid, 0)
		if err != nil {
			return err
		}
		s.erased, s.erasedRead = erased, true
		if erased {
			r.logger.Info("lines of a session erased here still come from a machine that kept it; not written here",
				"session", s.sid, "node", s.queue[0].Node)
		}
	}
	if s.erased {
		r.erasedLines.Add(int64(len(s.queue)))
		r.dropQueue(s)
	}
	return nil
}

// A session erased and then written again under its id (its header first:
// a new session here) can still get lines of its erased past: a machine
// that was offline at the erase and continued the session there publishes
// its lines when it comes back, before the erase reaches it. Their parents
// went with the erase, so no machine has them, and the rule for a line
// whose parent no machine has (write it, an orphan as in its origin's file)
// put the erased conversation back into the new session on every machine
// but that one, as a second root whose last entry pi resumed (a probe,
// 2026-12-07). In a session erased here, such a line, and every line
// below it, is passed over instead, as the lines of an erased session are.

// askErased asks once, when a line in s's queue has a parent that neither
// file f nor any line seen holds, whether s was erased here.
func (r *Replicator) askErased(ctx context.Context, s *sess, f *replica) error {
	if s.erasedRead || r.state == nil { // nil: a test's replicator without a state bucket
		return nil
	}
	orphan := false
	for _, ev := range s.queue {
		if ev.ParentID == "" {
			continue
		}
		_, here := f.ids[ev.ParentID]
		_, known := s.seen[ev.ParentID]
		if !here && !known {
			orphan = true
			break
		}
	}
	if !orphan {
		return nil
	}
	erased, err := r.eraseApplied(ctx, s.sid, 0)
	if err != nil {
		return err
	}
	s.erased, s.erasedRead = erased, true
	return nil
}

// passBelowErased passes over ev, a line of s (erased here) below an entry
// no machine has or below a line passed over so.
func (r *Replicator) passBelowErased(s *sess, ev *eventlog.Event) {
	if s.belowErased == nil {
		s.belowErased = map[string]bool{}
		r.logger.Info("lines written below entries of this session that were erased here are not written here (a machine that kept the session wrote them)",
			"session", s.sid, "node", ev.Node)
	}
	if ev.ID != "" {
		s.belowErased[ev.ID] = true
	}
	r.waiting.Add(-1)
	r.erasedLines.Add(1)
}

// erasedKey is the state key of the PI_ALL sequence of the last erase
// event of session sid applied here.
func erasedKey(sid string) string { return SessionKey("replicator.erased.", sid) }

// eraseApplied reports whether the erase event at PI_ALL sequence seq, or
// a later one of the same session, was applied here already.
func (r *Replicator) eraseApplied(ctx context.Context, sid string, seq uint64) (bool, error) {
	e, err := r.state.Get(ctx, erasedKey(sid))
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("replicator: erase %s: %w", sid, err)
	}
	done, err := strconv.ParseUint(string(e.Value()), 10, 64)
	return err == nil && done >= seq, nil
}

// endHold ends the hold of a session erased here once its erase event
// (PI_ALL sequence seq) has come back.
func (r *Replicator) endHold(ctx context.Context, sid string, seq uint64) error {
	r.eraseMu.Lock()
	defer r.eraseMu.Unlock()
	if err := r.loadHolds(ctx); err != nil {
		return err
	}
	after, ok := r.holds[sid]
	if !ok || seq <= after {
		return nil // no hold, or an erase event of an earlier erase
	}
	if err := r.state.Delete(ctx, holdKey(sid)); err != nil && !errors.Is(err, jetstream.ErrKeyNotFound) {
		return fmt.Errorf("replicator: end the erase hold of %s: %w", sid, err)
	}
	delete(r.holds, sid)
	return nil
}
