package embedded

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestRemoveNode: a registration goes by the name it holds, whatever its
// file is called, and the others stay; an unknown name is an error that
// says where it looked.
func TestRemoveNode(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "nodes")
	for _, n := range []string{"ann", "bob", "eve"} {
		if _, err := AddNode(dir, n, "t1"); err != nil {
			t.Fatal(err)
		}
	}
	// eve's registration under a file name of its own.
	if err := os.Rename(filepath.Join(dir, "eve.json"), filepath.Join(dir, "zz-intruder.json")); err != nil {
		t.Fatal(err)
	}
	n, err := RemoveNode(dir, "eve")
	if err != nil || n.Name != "eve" || n.Team != "t1" {
		t.Fatalf("RemoveNode(eve) = %+v, %v", n, err)
	}
	left, err := LoadNodes(dir)
	if err != nil || len(left) != 2 || left[0].Name != "ann" || left[1].Name != "bob" {
		t.Fatalf("after removing eve: %+v, %v", left, err)
	}
	if _, err := os.Stat(filepath.Join(dir, "zz-intruder.json")); !os.IsNotExist(err) {
		t.Errorf("eve's file is still there: %v", err)
	}
	_, err = RemoveNode(dir, "eve")
	if err == nil || !strings.Contains(err.Error(), dir) || !strings.Contains(err.Error(), "hub nodes") {
		t.Errorf("RemoveNode of a node not registered: %v", err)
	}
	if _, err := RemoveNode(filepath.Join(dir, "missing"), "ann"); err == nil {
		t.Error("RemoveNode in a folder that does not exist: no error")
	}
}
