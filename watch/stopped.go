package watch

import (
	"context"

	"github.com/pisyncd/pisyncd/eventlog"
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
// attempt): a sessions dir not mounted yet, or a folder or file the
// daemon may not read, looks like its sessions deleted (a file is known
// as its session's only once read), and other machines would move their
// copies to the trash. A deletion not
// published (a store that refuses it) is tried again at the next start.
func (t *Tailer) deletedWhileStopped(ctx context.Context, held map[string]struct{}, found int) {
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
	if found == 0 || t.unreadableDirs.Load() > 0 || t.Retrying() > 0 {
		t.logger.Warn("sessions in the store have no file here, and no deletion is published for them: the sessions dir held no session file, or a folder or file in it could not be read",
			"sessions", len(gone), "files_found", found, "unreadable_folders", t.unreadableDirs.Load(), "files_retrying", t.Retrying())
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
