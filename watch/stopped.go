package watch

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/pisyncd/pisyncd/eventlog"
	"github.com/pisyncd/pisyncd/internal/fsutil"
)

// deletedWhileStopped publishes the deletion of the sessions whose last
// file went while no tailer ran. A running tailer sees a file go and
// publishes a tombstone (fileGone); one that starts after the removal
// finds nothing to follow, and without this the session stayed live here
// and on every other machine for good. held is the sessions whose
// subjects held lines at start; a session among them that no file holds
// after the first read is gone, unless its last event is not a line or a
// restore (a tombstone: deleted before; an erase event: erased) or another
// machine deleted it (the replicator moved the file to the trash itself).
//
// Nothing is published when the first read found no session file at all,
// a folder could not be read, or a file could not (it waits for another
// attempt), another user's file was left unread, or the sessions dir is
// not the one the store's sessions were read from last (lastRoot, from
// Options.RootFile; "" when not known): a sessions dir not mounted yet, a
// folder or file the daemon may not read, or another sessions dir (a
// PI_CODING_AGENT_DIR set in one place and not another) looks like its
// sessions deleted (a file is known as its session's only once read), and
// other machines would move their copies to the trash. A deletion not
// published (a store that refuses it) is tried again at the next start.
func (t *Tailer) deletedWhileStopped(ctx context.Context, held map[string]struct{}, found int, lastRoot string) {
	var gone []string
	t.mu.Lock()
	for sid := range held {
		if _, ok := t.sessions[sid]; !ok {
			gone = append(gone, sid)
		}
	}
	t.mu.Unlock()
	if len(gone) == 0 {
		return
	}
	if lastRoot != "" && !sameDir(lastRoot, t.root) {
		t.logger.Warn("sessions in the store have no file here, and no deletion is published for them: the sessions dir is not the one they were read from",
			"sessions", len(gone), "dir", t.root, "read_from", lastRoot,
			"hint", "if the sessions dir moved by mistake (PISYNC_SESSIONS_DIR or PI_CODING_AGENT_DIR set in one place and not another), set it back; sessions deleted meanwhile are then published as deleted")
		return
	}
	foreign := t.ignoredBy[ignoreForeign].Load()
	if found == 0 || t.unreadableDirs.Load() > 0 || t.Retrying() > 0 || foreign > 0 {
		t.logger.Warn("sessions in the store have no file here, and no deletion is published for them: the sessions dir held no session file, or a folder or file in it could not be read",
			"sessions", len(gone), "files_found", found, "unreadable_folders", t.unreadableDirs.Load(), "files_retrying", t.Retrying(), "other_users_files", foreign)
		return
	}
	for _, sid := range gone {
		if err := t.tombstoneGone(ctx, sid); err != nil {
			if ctx.Err() != nil {
				return
			}
			t.logger.Warn("the deletion of a session removed while pisyncd was stopped was not published; it is tried again at the next start",
				"session", sid, "err", err)
		}
	}
}

// tombstoneGone publishes sid's deletion unless it is deleted already.
func (t *Tailer) tombstoneGone(ctx context.Context, sid string) error {
	_, last, err := t.log.Last(ctx, sid)
	if err != nil || last == nil {
		return err
	}
	if last.Op != "" && last.Op != eventlog.OpRestore {
		return nil // deleted already, or erased (its erase event is all that is left)
	}
	if t.deletedElsewhere != nil {
		if elsewhere, err := t.deletedElsewhere(ctx, sid); err != nil || elsewhere {
			return err
		}
	}
	// A session log of its own, loaded from the store as for any
	// session: were the file to come back meanwhile, the two publishes
	// state the subject's last sequence and one of them is refused.
	if err := t.tombstone(ctx, &sessionLog{sid: sid}, last.File); err != nil {
		return err
	}
	t.deleted.Add(1)
	t.logger.Info("session file deleted while pisyncd was stopped", "file", last.File, "session", sid)
	return nil
}

// lastRoot reads Options.RootFile: the sessions dir of the last first
// read, "" when not kept (no file yet: a store from before it was kept).
func (t *Tailer) lastRoot() string {
	if t.rootFile == "" {
		return ""
	}
	b, err := os.ReadFile(t.rootFile)
	if err != nil {
		if !errors.Is(err, fs.ErrNotExist) {
			t.logger.Warn("watch: the sessions dir of the last run could not be read; sessions without a file here are not published as deleted", "file", t.rootFile, "err", err)
			return "(unreadable: " + t.rootFile + ")" // not this root: nothing is taken for deleted
		}
		return ""
	}
	return strings.TrimSuffix(string(b), "\n")
}

// keepRoot records this sessions dir in Options.RootFile, after a first
// read that compared the store's sessions with it, unless it is kept
// there already (read at the start of Run).
func (t *Tailer) keepRoot() {
	if t.rootFile == "" || t.lastRootDir == t.root {
		return
	}
	if err := fsutil.WriteFileAtomic(t.rootFile, []byte(t.root+"\n")); err != nil {
		t.logger.Warn("watch: the sessions dir not kept for the next start", "file", t.rootFile, "err", err)
	}
}

// sameDir reports whether a and b name one folder: the same path, or two
// paths to it (a link).
func sameDir(a, b string) bool {
	if filepath.Clean(a) == filepath.Clean(b) {
		return true
	}
	sa, err := os.Stat(a)
	if err != nil {
		return false
	}
	sb, err := os.Stat(b)
	return err == nil && os.SameFile(sa, sb)
}
