//go:build linux

package codepages_test

import (
	"bytes"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/pisyncd/pisyncd/internal/codepages"
	"github.com/pisyncd/pisyncd/internal/testenv"
)

// TestDropLetsGoOfTheExecutablesPages: after Drop the test binary holds
// fewer of its file's pages, and runs on.
func TestDropLetsGoOfTheExecutablesPages(t *testing.T) {
	before := testenv.ProcStatus("RssFile")
	n, err := codepages.Drop()
	if err != nil {
		t.Fatal(err)
	}
	after := testenv.ProcStatus("RssFile")
	t.Logf("advised %d MiB; file pages resident %d KiB before, %d KiB after", n>>20, before>>10, after>>10)
	if n == 0 || before == 0 || after >= before {
		t.Fatalf("advised %d bytes; file pages resident %d before, %d after", n, before, after)
	}
}

// TestDropKeepsWhatWasWritten: a position-independent executable's
// relocated data is written at start and made read-only after; dropping
// it would lose the relocations and crash the program at its next use of
// a type (as it did when Drop did not look for a mapping's own pages). A
// program built both ways drops its pages and then computes with
// interfaces, reflection and the collector.
func TestDropKeepsWhatWasWritten(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a program twice (-short)")
	}
	for _, mode := range []string{"exe", "pie"} {
		t.Run(mode, func(t *testing.T) {
			bin := filepath.Join(t.TempDir(), "droprun")
			build := exec.Command("go", "build", "-buildmode="+mode, "-o", bin, "./testdata/droprun")
			if out, err := build.CombinedOutput(); err != nil {
				t.Fatalf("go build -buildmode=%s: %v\n%s", mode, err, out)
			}
			out, err := exec.Command(bin).CombinedOutput()
			if err != nil {
				t.Fatalf("the program, built -buildmode=%s, after dropping its pages: %v\n%s", mode, err, firstLines(out, 8))
			}
			if want := `{"OS":"LINUX","SHAPES":[{"S":1},{"S":2},{"W":2,"H":3}]}`; string(bytes.TrimSpace(out)) != want {
				t.Fatalf("printed %q, want %q", out, want)
			}
		})
	}
}

func firstLines(b []byte, n int) []byte {
	lines := bytes.SplitN(b, []byte("\n"), n+1)
	return bytes.Join(lines[:min(n, len(lines))], []byte("\n"))
}
