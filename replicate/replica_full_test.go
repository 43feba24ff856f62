package replicate

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/pisyncd/pisyncd/internal/testenv"
)

// TestReplicaAppendOnFullDisk: a write that a full (real, tmpfs) disk takes
// only part of is taken back, so the file still ends with a whole line and
// the same append passes once space is freed.
func TestReplicaAppendOnFullDisk(t *testing.T) {
	dir := t.TempDir()
	testenv.Tmpfs(t, dir, 1<<20)
	p := filepath.Join(dir, "s1.jsonl")
	writeTestFile(t, p, hdrS1+"\n"+entA+"\n")
	r, err := openReplica(p, "s1")
	if err != nil {
		t.Fatal(err)
	}
	free := testenv.Fill(t, dir)
	// Larger than the page the file's tail may still have room in.
	big := `{"type":"message","id":"b","parentId":"a","message":{"content":"` + strings.Repeat("x", 64<<10) + `"}}`
	before, _ := os.ReadFile(p)
	if err := r.appendLines([][]byte{[]byte(big)}); !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("append on a full disk: %v, want ENOSPC", err)
	}
	if after, _ := os.ReadFile(p); string(after) != string(before) {
		t.Fatalf("a failed append left %d bytes behind", len(after)-len(before))
	}
	if busy, _, err := r.busy(0, time.Now()); err != nil || busy {
		t.Fatalf("after a failed append the file reads as busy (%v, %v)", busy, err)
	}
	free()
	if err := r.appendLines([][]byte{[]byte(big)}); err != nil {
		t.Fatalf("append after space was freed: %v", err)
	}
	if after, _ := os.ReadFile(p); string(after) != string(before)+big+"\n" {
		t.Fatal("the file does not hold the appended line after its earlier lines")
	}
}
