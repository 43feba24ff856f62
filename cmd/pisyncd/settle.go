package main

import (
	"context"
	"runtime/debug"

	"github.com/pisyncd/pisyncd/eventlog"
)

// afterFirstRead gives the memory of the start's burst back to the system
// once the tailer has read every file present at start and the projection
// has caught up with what it published. A first read of thousands of
// sessions leaves tens of megabytes of garbage (lines, batches, views);
// the runtime would return the freed pages by itself, but over minutes,
// and an idle daemon's resident set is what a user sees.
func (d *Daemon) afterFirstRead(ctx context.Context) {
	select {
	case <-d.tailer.Ready():
	case <-ctx.Done():
		return
	}
	info, err := d.log.Info(ctx)
	if err != nil {
		return // nothing to wait for: the next burst's garbage goes back by itself
	}
	if err := d.proj.WaitHandled(ctx, eventlog.LocalStream, info.LastSeq); err != nil {
		return
	}
	debug.FreeOSMemory()
}
