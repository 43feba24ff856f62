package fsutil

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/pisyncd/pisyncd/internal/testenv"
)

// TestReadSetting: a setting's file is read whole; a named pipe with no
// writer, a folder and a device past the bound are errors at once, and a
// pipe with something written to it reads as the file would.
func TestReadSetting(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "seed")
	if err := os.WriteFile(file, []byte("SUAseed\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	lonely := filepath.Join(dir, "lonely")
	if err := unix.Mkfifo(lonely, 0o600); err != nil {
		t.Fatal(err)
	}
	// A pipe as `<(…)` passes it: its path in /dev/fd, written to and
	// closed by the writer.
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	w.Write([]byte("SUAseed\n"))
	w.Close()
	fed := fmt.Sprintf("/dev/fd/%d", r.Fd())

	for _, c := range []struct{ path, want, err string }{
		{path: file, want: "SUAseed\n"},
		{path: fed, want: "SUAseed\n"},
		{path: lonely, err: "a named pipe that nothing writes to"},
		{path: dir, err: "is a folder, not a file"},
		{path: "/dev/zero", err: "holds more than 1024 bytes"},
		{path: filepath.Join(dir, "missing"), err: "no such file"},
	} {
		var got []byte
		var err error
		testenv.Within(t, 30*time.Second, c.path, func() { got, err = ReadSetting(c.path, 1024) })
		switch {
		case c.err != "" && (err == nil || !strings.Contains(err.Error(), c.err)):
			t.Errorf("%s: %v, want an error with %q", c.path, err, c.err)
		case c.err == "" && (err != nil || string(got) != c.want):
			t.Errorf("%s: %q, %v; want %q", c.path, got, err, c.want)
		}
	}
}
