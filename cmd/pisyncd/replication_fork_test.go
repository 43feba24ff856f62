package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/pisyncd/pisyncd/internal/testenv"
	"github.com/pisyncd/pisyncd/replicate"
)

// TestForkOfAReplicatedSession: pi forks a session on A; on B (another
// sessions root, cwd mapped /Users/ann → /home/ann) the fork's header names
// B's copy of the parent, which is what pi on B lists the fork under. B's
// tailer takes that header for the one A published, across a restart: the
// next line pi writes on B is the only one B publishes. A fork into another
// project names B's copy of the parent too.
func TestForkOfAReplicatedSession(t *testing.T) {
	testenv.Oracle(t) // skips without node or shared/
	hub, _, b, aDir, bDir := mappedPair(t)
	const cwdA, cwdB = pairCwdA, pairCwdB
	parent := piWrite(t, `[{"op": "user", "text": "hello", "as": "u1"}, {"op": "assistant", "text": "hi"}]`, aDir, "--cwd", cwdA)
	fork := piWrite(t, `[{"op": "user", "text": "in the fork"}, {"op": "assistant", "text": "forked"}]`,
		aDir, "--cwd", cwdA, "--fork-from", parent.SessionFile)
	bParent := filepath.Join(bDir, filepath.Base(parent.SessionFile))
	bFork := filepath.Join(bDir, filepath.Base(fork.SessionFile))
	lines := func(p string) int {
		raw, _ := os.ReadFile(p)
		return len(splitLines(string(raw)))
	}
	aForkLines := lines(fork.SessionFile)
	waitUntil(t, 30*time.Second, func() (bool, string) {
		n := lines(bFork)
		return n == aForkLines, fmt.Sprintf("B's copy of the fork has %d of %d lines", n, aForkLines)
	})
	hub.waitCount(t, 10*time.Second, "pi.up.ws-a.>", uint64(2*1+parent.EntryCount+fork.EntryCount))

	listed := func() map[string]string { // session file's name → parentSessionPath, as pi on B lists them
		out, err := testenv.RunOracle(t, time.Minute, "list", bDir)
		if err != nil {
			t.Fatal(err)
		}
		var list struct {
			Sessions []struct {
				File              string
				ParentSessionPath *string `json:"parentSessionPath"`
			}
		}
		if err := json.Unmarshal(out, &list); err != nil {
			t.Fatalf("pi-oracle list: %v: %s", err, out)
		}
		got := map[string]string{}
		for _, s := range list.Sessions {
			name := filepath.Base(s.File)
			got[name] = ""
			if s.ParentSessionPath != nil {
				got[name] = *s.ParentSessionPath
			}
		}
		return got
	}
	if got := listed(); len(got) != 2 || got[filepath.Base(bFork)] != bParent || got[filepath.Base(bParent)] != "" {
		t.Fatalf("pi on B lists %v; want the fork %s under B's copy of its parent, %s", got, bFork, bParent)
	}

	// After a restart B's tailer reads both files again; the fork's header,
	// as B wrote it, is still A's line and not B's to publish.
	b.stop()
	b.start()
	more := piWrite(t, `[{"op": "user", "text": "continued on B"}]`, bDir, "--cwd", cwdB, "--open", bFork)
	if more.SessionFile != bFork {
		t.Fatalf("pi continued %s, want %s", more.SessionFile, bFork)
	}
	waitUntil(t, 30*time.Second, func() (bool, string) {
		n := lines(fork.SessionFile)
		return n == aForkLines+1, fmt.Sprintf("A's fork has %d of %d lines", n, aForkLines+1)
	})
	// B published its lines in the file's order: all of them are on the hub.
	if n, err := hub.count("pi.up.ws-b.>"); err != nil || n != 1 {
		t.Fatalf("B published %d lines (%v), want only pi's new one", n, err)
	}
	if got := listed(); got[filepath.Base(bFork)] != bParent {
		t.Fatalf("after pi wrote on B, it lists %v", got)
	}

	// A fork into another project: its copy lands in that project's
	// folder on B and names B's copy of the parent, in the parent's own
	// folder here (it named A's folder under B's root, where no file is:
	// a probe, 2026-12-07).
	const otherA, otherB = "/Users/ann/other", "/home/ann/other"
	aOther := filepath.Join(filepath.Dir(aDir), replicate.CwdFolder(otherA))
	if err := os.MkdirAll(aOther, 0o700); err != nil {
		t.Fatal(err)
	}
	moved := piWrite(t, `[{"op": "user", "text": "in another project"}]`, aOther, "--cwd", otherA, "--fork-from", parent.SessionFile)
	bMoved := filepath.Join(filepath.Dir(bDir), replicate.CwdFolder(otherB), filepath.Base(moved.SessionFile))
	waitUntil(t, 30*time.Second, func() (bool, string) {
		n := lines(bMoved)
		return n == lines(moved.SessionFile), fmt.Sprintf("B's copy of the fork into %s has %d lines", otherB, n)
	})
	var hdr struct{ ParentSession string }
	raw, _ := os.ReadFile(bMoved)
	if err := json.Unmarshal([]byte(splitLines(string(raw))[0]), &hdr); err != nil || hdr.ParentSession != bParent {
		t.Fatalf("B's copy of the fork into %s names its parent %q (%v), want B's copy %s", otherB, hdr.ParentSession, err, bParent)
	}
}
