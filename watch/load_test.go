package watch

import (
	"context"
	"errors"
	"path/filepath"
	"testing"
)

// TestFailedLoadLeavesNothingLoaded: a session whose load fails part way
// (here the replicator's known lines cannot be read) is left not loaded, so
// that the next publish loads it again, rather than half loaded, which
// would take the lines it missed for lines the subject lacks.
func TestFailedLoadLeavesNothingLoaded(t *testing.T) {
	root := t.TempDir()
	n := startNode(t, root, t.TempDir())
	writeFile(t, filepath.Join(root, "--p--", "s1.jsonl"), header("s1")+"\n"+entry("a", "", "one")+"\n")
	n.waitLines("s1", []string{header("s1"), entry("a", "", "one")})
	s := &sessionLog{sid: "s1"}
	_, err := s.load(context.Background(), n.log, func(context.Context, string, func([32]byte)) error {
		return errors.New("PI_ALL unreadable")
	}, false)
	if err == nil || s.known != nil || s.ids != nil {
		t.Fatalf("load: %v; known %d lines (nil: %v)", err, len(s.known), s.known == nil)
	}
	if _, err := s.load(context.Background(), n.log, nil, false); err != nil || len(s.known) != 2 {
		t.Fatalf("load again: %v, %d lines known", err, len(s.known))
	}
}
