package watch

import (
	"fmt"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/fsnotify/fsnotify"

	"github.com/pisyncd/pisyncd/internal/testenv"
)

// TestNoWatcherRelyOnRescans: with no watcher at all (the inotify instance
// limit, shared with editors and other watchers, reached) the tailer runs
// on its rescans, and says once which limit to raise and how; every folder
// counts as not watched. Before, the daemon exited at its start.
func TestNoWatcherRelyOnRescans(t *testing.T) {
	root := t.TempDir()
	var logs testenv.LogBuffer
	for i := range 5 {
		writeFile(t, filepath.Join(root, fmt.Sprintf("--p%d--", i), "a.jsonl"), header(fmt.Sprintf("w%d", i))+"\n")
	}
	n := startNodeWith(t, root, t.TempDir(), Options{RescanInterval: 200 * time.Millisecond, Logger: logs.Logger()}, func(tl *Tailer) {
		tl.newWatcher = func() (*fsnotify.Watcher, error) { return nil, fmt.Errorf("fsnotify: %w", syscall.EMFILE) }
	})
	for i := range 5 {
		n.waitLines(fmt.Sprintf("w%d", i), []string{header(fmt.Sprintf("w%d", i))})
	}
	// Live lines, found by the rescans alone.
	appendFile(t, filepath.Join(root, "--p0--", "a.jsonl"), entry("e1", "", "live")+"\n")
	n.waitLines("w0", []string{header("w0"), entry("e1", "", "live")})
	waitFor(t, 10*time.Second, func() (bool, string) {
		return n.tailer.Stats().UnwatchedFolders == 6, fmt.Sprintf("%d folders not watched, want 6 (the root and five)", n.tailer.Stats().UnwatchedFolders)
	})
	out := logs.String()
	if strings.Count(out, "sysctl -w fs.inotify.max_user_instances=") != 1 || !strings.Contains(out, "cannot watch any folder") {
		t.Errorf("the start does not name the limit once:\n%s", out)
	}
	if c := strings.Count(out, `msg="cannot watch folder;`); c != 0 || strings.Count(out, `msg="cannot watch folders;`) != 1 {
		t.Errorf("six folders not watched: %d lines one by one, want one line for all:\n%s", c, out)
	}
}

func TestWatchFix(t *testing.T) {
	for _, c := range []struct {
		err   error
		start bool
		want  string
	}{
		{syscall.ENOSPC, false, "fs.inotify.max_user_watches"},
		{fmt.Errorf("add: %w", syscall.ENOSPC), false, "sysctl -w fs.inotify.max_user_watches="},
		{syscall.EMFILE, true, "fs.inotify.max_user_instances"},
		{syscall.EMFILE, false, "next rescan"},
		{syscall.EACCES, false, "next rescan"},
	} {
		if got := watchFix(c.err, c.start); !strings.Contains(got, c.want) {
			t.Errorf("watchFix(%v, %v) = %q, want it to hold %q", c.err, c.start, got, c.want)
		}
	}
}
