package main

import (
	"context"
	"errors"
	"io/fs"
	"path/filepath"
	"strings"
	"time"
)

// firstCopyNag is how often a first read held for the hub says so again.
const firstCopyNag = time.Minute

// waitFirstCopy holds the tailer's first read, on a state dir that has
// published nothing, until the downloader has copied what the hub holds
// (eventlog/firstcopy.go), when the sessions dir holds a session file
// written before the store was made: such a file may be a copy of another
// machine's session, which the tailer tells by PI_ALL, empty until then (a
// reinstall, or a node added again under a new id, published every copy
// as its own). The wait, once found due, holds at every start until the
// copy is complete. A sessions dir without older files is read at once,
// the hub up or not; so is one whose state has published lines, or copied
// from the hub before; and a daemon without a hub. While it waits, no
// file is read, a new one included.
func (d *Daemon) waitFirstCopy(ctx context.Context) error {
	if d.dl == nil {
		return nil
	}
	done, err := d.dl.FirstCopyDone(ctx)
	if err != nil || done {
		return err
	}
	owner, err := d.log.Owner(ctx)
	if err != nil || owner != "" {
		return err
	}
	older := "(an earlier start found one)"
	owed, err := d.dl.FirstCopyOwed(ctx)
	if err != nil {
		return err
	}
	if !owed {
		info, err := d.log.Stream().Info(ctx)
		if err != nil {
			return err
		}
		if older, err = fileBefore(d.cfg.SessionsDir, info.Created); err != nil || older == "" {
			return err
		}
		// Kept: the user's work in those files while this waits makes
		// them newer than the store, and a restart then found none.
		if err := d.dl.OweFirstCopy(ctx); err != nil {
			return err
		}
	}
	start := time.Now()
	d.waitingForHub.Store(true)
	defer d.waitingForHub.Store(false)
	d.logger.Info("this state dir has published nothing yet, and the sessions dir holds files from before it: they are read once the hub's lines are copied here, so that copies of other machines' sessions are not published as this machine's",
		"file", older)
	nag := time.NewTicker(firstCopyNag)
	defer nag.Stop()
	for {
		select {
		case <-d.dl.FirstCopy():
			d.logger.Info("the hub's lines are copied: reading the session files", "waited", time.Since(start).Round(time.Millisecond))
			return nil
		case <-nag.C:
			d.logger.Warn("the session files are not read yet: this state dir's first copy from the hub has not completed",
				"waited", time.Since(start).Round(time.Second),
				"hint", "pisyncd status says why: the hub out of reach, or other machines' sessions held for a team key this machine lacks (pisyncd key import); the files are read as soon as the copy is complete")
		case <-ctx.Done():
			return nil
		}
	}
}

// fileBefore returns a session file under root last written before t, ""
// if there is none (hidden folders, pisyncd's trash among them, left out).
func fileBefore(root string, t time.Time) (string, error) {
	found := ""
	err := filepath.WalkDir(root, func(p string, de fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) || errors.Is(err, fs.ErrPermission) {
				return nil // gone, or the tailer's to report
			}
			return err
		}
		if de.IsDir() && p != root && strings.HasPrefix(de.Name(), ".") {
			return fs.SkipDir
		}
		if de.IsDir() || !strings.HasSuffix(de.Name(), ".jsonl") {
			return nil
		}
		if info, err := de.Info(); err == nil && info.ModTime().Before(t) {
			found = p
			return fs.SkipAll
		}
		return nil
	})
	return found, err
}
