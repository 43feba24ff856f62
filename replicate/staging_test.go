package replicate

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"testing"
	"time"
)

// TestStagingLeftoversRemovedAtStart: the staging files a crash left in
// the project folders are removed as the replicator starts, and nothing
// else: not a name that only looks like one, a link, a folder, a file in
// the trash or deeper down, nor a fresh one behind a linked project folder
// (another sessions dir's daemon may be staging it). Before, only erasing
// their session removed them.
func TestStagingLeftoversRemovedAtStart(t *testing.T) {
	root, ext := t.TempDir(), t.TempDir()
	proj := filepath.Join(root, "--p--")
	for _, d := range []string{proj, filepath.Join(proj, "sub"), filepath.Join(root, TrashDir),
		filepath.Join(proj, ".pisync-2222222222222222.tmp")} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink(ext, filepath.Join(root, "--linked--")); err != nil {
		t.Fatal(err)
	}
	outside := filepath.Join(t.TempDir(), "target")
	writeTestFile(t, outside, "not ours\n")
	if err := os.Symlink(outside, filepath.Join(proj, ".pisync-1111111111111111.tmp")); err != nil {
		t.Fatal(err)
	}
	gone := []string{
		filepath.Join(proj, ".pisync-0123456789abcdef.tmp"),
		filepath.Join(ext, ".pisync-6666666666666666.tmp"), // behind a link, two minutes old
	}
	kept := []string{
		filepath.Join(proj, ".pisync-0123456789abcdeg.tmp"),
		filepath.Join(proj, ".pisync-0123456789ABCDEF.tmp"),
		filepath.Join(proj, ".pisync-01234567.tmp"),
		filepath.Join(proj, "0123456789abcdef.tmp"), // a name of the staging's shape without its prefix
		filepath.Join(proj, ".pisyncd-0123456789abcdef.tmp"),
		filepath.Join(proj, ".pisync-0123456789abcdef.tmp.jsonl"),
		filepath.Join(proj, "2026-11-30T00-00-00-000Z_s1.jsonl"),
		filepath.Join(proj, "sub", ".pisync-7777777777777777.tmp"),
		filepath.Join(root, TrashDir, ".pisync-3333333333333333.tmp"),
		filepath.Join(root, ".pisync-4444444444444444.tmp"),
		filepath.Join(ext, ".pisync-5555555555555555.tmp"), // behind a link, fresh
	}
	for _, p := range append(slices.Clone(gone), kept...) {
		writeTestFile(t, p, hdrS1+"\n")
	}
	now := time.Now()
	old := now.Add(-2 * stagingMinAge)
	if err := os.Chtimes(gone[1], old, old); err != nil {
		t.Fatal(err)
	}

	removed, err := sweepStaging(root, now)
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(removed)
	want := []string{gone[0], filepath.Join(root, "--linked--", filepath.Base(gone[1]))} // by the path through the link
	slices.Sort(want)
	if !slices.Equal(removed, want) {
		t.Errorf("removed %q, want %q", removed, want)
	}
	for _, p := range gone {
		if _, err := os.Lstat(p); !os.IsNotExist(err) {
			t.Errorf("%s left behind (%v)", p, err)
		}
	}
	for _, p := range append(kept, filepath.Join(proj, ".pisync-1111111111111111.tmp"), filepath.Join(proj, ".pisync-2222222222222222.tmp")) {
		if _, err := os.Lstat(p); err != nil {
			t.Errorf("%s removed: %v", p, err)
		}
	}
	if b, _ := os.ReadFile(outside); string(b) != "not ours\n" {
		t.Errorf("the link's target changed: %q", b)
	}
	// The names createFile stages under are the ones swept.
	if p, _, err := createFile(root, filepath.Join(proj, "s1.jsonl"), [][]byte{[]byte(hdrS1)}); err != nil || filepath.Base(p) != "s1.jsonl" {
		t.Fatalf("createFile: %s, %v", p, err)
	}
	if !staging(stagingPrefix + "00112233445566ff" + stagingSuffix) {
		t.Error("a name createFile makes is not recognised")
	}
	// A sessions dir not made yet is no error.
	if removed, err := sweepStaging(filepath.Join(root, "none"), now); err != nil || len(removed) != 0 {
		t.Errorf("missing root: %q, %v", removed, err)
	}
}

// FuzzStagingName: staging takes exactly the names createFile stages
// under, judged here by a regular expression; the start deletes what it
// takes, so a name it takes by mistake is a user's file lost.
func FuzzStagingName(f *testing.F) {
	for _, s := range []string{".pisync-0123456789abcdef.tmp", "0123456789abcdef.tmp", ".pisync-0123456789ABCDEF.tmp",
		".pisync-0123456789abcdef.tmp.jsonl", ".pisyncd-0123456789abcdef.tmp", "x.pisync-0123456789abcdef.tmp", ""} {
		f.Add(s)
	}
	want := regexp.MustCompile(`^\.pisync-[0-9a-f]{16}\.tmp$`)
	f.Fuzz(func(t *testing.T, name string) {
		if got := staging(name); got != want.MatchString(name) {
			t.Fatalf("staging(%q) = %v", name, got)
		}
	})
}
