package replicate

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestCwdFolder(t *testing.T) {
	for in, want := range map[string]string{
		"/home/alice/proj": "--home-alice-proj--", "/": "----", `C:\Users\a`: "--C--Users-a--",
		"/a/b/": "--a-b--",
		// pi resolves the cwd first (path.resolve): a copy in any other
		// folder is not listed by pi here (a probe found each of these).
		"/../../etc": "--etc--", "/home/ann/proj/..": "--home-ann--", "/.": "----", "/..": "----",
		"//Users/ann/p2": "--Users-ann-p2--", "/a/./b//c": "--a-b-c--",
		// A '\' is a character of a POSIX name: pi keeps it to replace it.
		`/a\`: "--a---",
	} {
		if got := CwdFolder(in); got != want {
			t.Errorf("CwdFolder(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestPathMap(t *testing.T) {
	m, err := ParsePathMap("/Users/ann=/home/ann, /Users/ann/src=/srv/src")
	if err != nil {
		t.Fatal(err)
	}
	for in, want := range map[string]string{
		"/Users/ann/src/x": "/srv/src/x", "/Users/ann/doc": "/home/ann/doc", "/Users/ann": "/home/ann",
		"/Users/annie/x": "/Users/annie/x", "/other": "/other",
		// Matched as pi resolves the path, mapped resolved.
		"//Users/ann/p2": "/home/ann/p2", "/Users/ann/./p/": "/home/ann/p", "/Users/ann/../bob": "/Users/ann/../bob",
		// A '\' does not part a POSIX path's names.
		`/Users/ann\x`: `/Users/ann\x`,
	} {
		if got := m.Map(in); got != want {
			t.Errorf("Map(%q) = %q, want %q", in, got, want)
		}
	}
	// A rule to "/" made "//proj", whose folder pi does not list; another
	// system's path is mapped with its separators made '/'.
	m, err = ParsePathMap(`/m1=/, C:\Users\ann=/home/ann, /srv=C:\srv`)
	if err != nil {
		t.Fatal(err)
	}
	for in, want := range map[string]string{
		"/m1/proj": "/proj", "/m1": "/", `C:\Users\ann\p\q`: "/home/ann/p/q", "/srv/x": `C:\srv/x`,
	} {
		if got := m.Map(in); got != want {
			t.Errorf("Map(%q) = %q, want %q", in, got, want)
		}
	}
	for bad, why := range map[string]string{
		"x=/y": "absolute", "/x=y": "absolute", "/x": "absolute", "/a=/b,/a/=/c": "mapped twice",
		"/a,b=/x": "cannot hold a comma", "/a=/b=/c": "holds an '='", "/a/../b=/x": `holds ".."`,
		"/Users/ann=/home/a\nnn": "control character (U+000A)", "/a\tb=/x": "control character (U+0009)",
	} {
		if _, err := ParsePathMap(bad); err == nil || !strings.Contains(err.Error(), why) {
			t.Errorf("ParsePathMap(%q): %v, want an error saying %q", bad, err, why)
		}
	}
	// The same FROM twice: the same TO is one rule; another TO is an
	// error that names both, where before the first one won unsaid.
	if m, err := ParsePathMap("/a=/b, /a/=/b"); err != nil || len(m.rules) != 1 {
		t.Errorf("a rule given twice: %v, %v", m.rules, err)
	}
	if _, err := ParsePathMap("/a=/b,/a=/c"); err == nil || !strings.Contains(err.Error(), "/a is mapped twice, to /b and to /c") {
		t.Errorf("a FROM mapped twice: %v", err)
	}
}

func TestTargetStaysInsideRoot(t *testing.T) {
	root := "/r/sessions"
	ok := []struct{ cwd, file, sid, ts, want string }{
		{"/home/u/p", "--Users-u-p--/2026-01-01T00-00-00-000Z_abc.jsonl", "abc", "2026-01-01T00:00:00.000Z", "/r/sessions/--home-u-p--/2026-01-01T00-00-00-000Z_abc.jsonl"},
		{"/home/u/p", "", "abc", "2026-01-01T00:00:00.000Z", "/r/sessions/--home-u-p--/2026-01-01T00-00-00-000Z_abc.jsonl"},
		{"/../../etc", "x_abc.jsonl", "abc", "", "/r/sessions/--etc--/x_abc.jsonl"},
		{"/p", "../../../etc/passwd_abc.jsonl", "abc", "2026-01-01T00:00:00.000Z", "/r/sessions/--p--/passwd_abc.jsonl"},
		// A name without the session's id (another session's) is not
		// taken: the session gets pi's name for it.
		{"/home/ann/proj", "--home-ann-proj--/2026-12-06T10-00-00-000Z_victim.jsonl", "mallory", "2026-12-06T11:00:00.000Z", "/r/sessions/--home-ann-proj--/2026-12-06T11-00-00-000Z_mallory.jsonl"},
		{"/p", "x.jsonl", "abc", "", "/r/sessions/--p--/abc.jsonl"},
		// A short id is inside every name pi makes: not enough.
		{"/home/ann/proj", "--home-ann-proj--/2026-12-06T10-00-00-000Z_victim.jsonl", "2026", "2026-12-06T11:00:00.000Z", "/r/sessions/--home-ann-proj--/2026-12-06T11-00-00-000Z_2026.jsonl"},
		// A collision's copy keeps its name.
		{"/p", "--p--/2026-01-01T00-00-00-000Z_abc-1.jsonl", "abc", "", "/r/sessions/--p--/2026-01-01T00-00-00-000Z_abc-1.jsonl"},
		{"/p", "--p--/2026-01-01T00-00-00-000Z_abc-7.jsonl", "abc-7", "", "/r/sessions/--p--/2026-01-01T00-00-00-000Z_abc-7.jsonl"},
	}
	for _, c := range ok {
		got, err := target(root, c.cwd, c.file, c.sid, c.ts)
		if err != nil || got != filepath.FromSlash(c.want) {
			t.Errorf("target(%q, %q) = %q, %v; want %q", c.cwd, c.file, got, err, c.want)
		}
	}
	bad := []struct{ cwd, file, sid, ts string }{
		{"relative/cwd", "x.jsonl", "abc", ""},
		{"/p\x00q", "x.jsonl", "abc", ""},
		{"/p", "", "../../etc/x", "2026-01-01T00:00:00.000Z"},
		{"/p", ".hidden.jsonl", "a/b", "2026-01-01T00:00:00.000Z"},
		{"/p", "x.jsonl", "../../x", ""},
		{"/" + strings.Repeat("d", 300), "x.jsonl", "abc", ""},
	}
	for _, c := range bad {
		if got, err := target(root, c.cwd, c.file, c.sid, c.ts); !errors.Is(err, ErrUnsafe) {
			t.Errorf("target(%q, %q, %q, %q) = %q, %v; want ErrUnsafe", c.cwd, c.file, c.sid, c.ts, got, err)
		}
	}
}

func TestMapHeaderKeepsEverythingElse(t *testing.T) {
	m, _ := ParsePathMap("/Users/ann=/home/ann")
	in := `{"type":"session","version":3,"id":"s","timestamp":"t","cwd":"/Users/ann/p","parentSession":"/Users/ann/.pi/agent/sessions/--x--/a.jsonl","extra":{"cwd":"/Users/ann/keep"}}`
	out, cwd, err := mapHeader([]byte(in), m, "", "")
	if err != nil {
		t.Fatal(err)
	}
	want := `{"type":"session","version":3,"id":"s","timestamp":"t","cwd":"/home/ann/p","parentSession":"/home/ann/.pi/agent/sessions/--x--/a.jsonl","extra":{"cwd":"/Users/ann/keep"}}`
	if string(out) != want || cwd != "/home/ann/p" {
		t.Fatalf("mapHeader:\n got %s (%s)\nwant %s", out, cwd, want)
	}
	same := `{"type":"session","cwd":"/elsewhere/<p>&","id":"s"}`
	out, _, err = mapHeader([]byte(same), m, "/r", "--x--/b.jsonl")
	if err != nil || string(out) != same {
		t.Fatalf("unmapped header changed: %s %v", out, err)
	}
	for in, why := range map[string]string{
		`{"type":"session","id":"s","cwd":7}`:                      "the header's cwd is 7, not a path",
		`{"type":"session","id":"s","cwd":""}`:                     "the header's cwd is empty",
		`{"type":"session","id":"s"}`:                              "the header has no cwd",
		`{"type":"session","id":"s","cwd":"/Users/ann/p","cwd":7}`: "the header's cwd is 7", // JSON.parse takes the last
		`{"type":"session","id":"s","cwd":`:                        "header: ",
	} {
		_, _, err := mapHeader([]byte(in), m, "", "")
		if !errors.Is(err, ErrUnsafe) || !strings.Contains(err.Error(), why) || strings.Count(err.Error(), ErrUnsafe.Error()) != 1 {
			t.Errorf("mapHeader(%s): %v, want ErrUnsafe once, saying %q", in, err, why)
		}
	}
	// The last cwd, a string after another kind: pi's, mapped.
	if _, cwd, err := mapHeader([]byte(`{"type":"session","cwd":7,"cwd":"/Users/ann/p"}`), m, "", ""); err != nil || cwd != "/home/ann/p" {
		t.Errorf("the last cwd: %q, %v", cwd, err)
	}
}

// TestMapHeaderParentBeside: a fork's parent in the fork's own project
// folder on its machine is this machine's copy, in the folder of the mapped
// cwd under this machine's root; one in another project folder there is in
// that folder's here; other parents are mapped alone.
func TestMapHeaderParentBeside(t *testing.T) {
	m, _ := ParsePathMap("/Users/ann=/home/ann")
	const root = "/home/bob/.pi/agent/sessions"
	const origin = "--Users-ann-p--/2026-12-06T04-00-00-000Z_f.jsonl"
	for _, c := range []struct{ cwd, parent, origin, want string }{
		// pi's /fork: the parent beside the fork.
		{"/Users/ann/p", "/Users/ann/.pi/agent/sessions/--Users-ann-p--/2026-12-06T03-00-00-000Z_p.jsonl", origin,
			root + "/--home-ann-p--/2026-12-06T03-00-00-000Z_p.jsonl"},
		// Written on Windows.
		{`C:\Users\ann\p`, `C:\Users\ann\.pi\agent\sessions\--C--Users-ann-p--\a.jsonl`, "--C--Users-ann-p--/f.jsonl",
			root + "/--C--Users-ann-p--/a.jsonl"},
		// A fork into another project: the parent in that project's
		// folder here (mapped as a path, it named the other machine's
		// folder under this root, which no file is in).
		{"/Users/ann/p", "/Users/ann/.pi/agent/sessions/--Users-ann-q--/a.jsonl", origin,
			root + "/--home-ann-q--/a.jsonl"},
		// A project no rule maps keeps its folder's name.
		{"/Users/ann/p", "/Users/ann/.pi/agent/sessions/--opt-q--/a.jsonl", origin, root + "/--opt-q--/a.jsonl"},
		// Not in a project folder: mapped alone.
		{"/Users/ann/p", "/Users/ann/saved/a.jsonl", origin, "/home/ann/saved/a.jsonl"},
		// Not a session file's name, or no origin file known.
		{"/Users/ann/p", "/Users/ann/.pi/agent/sessions/--Users-ann-p--/..", origin, "/home/ann/.pi/agent/sessions"},
		{"/Users/ann/p", "/Users/ann/.pi/agent/sessions/--Users-ann-p--/a.jsonl", "", "/home/ann/.pi/agent/sessions/--Users-ann-p--/a.jsonl"},
		{"/Users/ann/p", "/Users/ann/.pi/agent/sessions/--Users-ann-p--/a.jsonl", "f.jsonl", "/home/ann/.pi/agent/sessions/--Users-ann-p--/a.jsonl"},
	} {
		cwd, _ := json.Marshal(c.cwd)
		parent, _ := json.Marshal(c.parent)
		in := `{"type":"session","parentSession":` + string(parent) + `,"cwd":` + string(cwd) + `}`
		out, _, err := mapHeader([]byte(in), m, root, c.origin)
		if err != nil {
			t.Fatalf("%s: %v", in, err)
		}
		var got struct{ ParentSession string }
		if err := json.Unmarshal(out, &got); err != nil || got.ParentSession != c.want {
			t.Errorf("%s from %q:\n got %s (%v)\nwant %s", c.parent, c.origin, got.ParentSession, err, c.want)
		}
	}
}

// TestMapFolder: a project folder of another machine named as here, from
// its name alone.
func TestMapFolder(t *testing.T) {
	m, err := ParsePathMap(`/Users/ann=/home/ann,/Users/ann/src=/src,/m1=/,/=/mnt/all,C:\Users\bo=/home/bo`)
	if err != nil {
		t.Fatal(err)
	}
	for in, want := range map[string]string{
		"--Users-ann--":       "--home-ann--",
		"--Users-ann-p--":     "--home-ann-p--",
		"--Users-ann-src-x--": "--src-x--", // the longest rule first
		"--Users-annex--":     "--mnt-all-Users-annex--",
		"--m1--":              "----",
		"--m1-proj--":         "--proj--",
		"--C--Users-bo-p--":   "--home-bo-p--",
		"--tmp--":             "--mnt-all-tmp--",
		"not-a-folder":        "not-a-folder",
		"--x":                 "--x",
		"---":                 "---",
	} {
		if got := m.MapFolder(in); got != want {
			t.Errorf("MapFolder(%q) = %q, want %q", in, got, want)
		}
	}
	if got := (PathMap{}).MapFolder("--Users-ann--"); got != "--Users-ann--" {
		t.Errorf("no rules: %q", got)
	}
}

func FuzzMapHeader(f *testing.F) {
	f.Add([]byte(`{"type":"session","cwd":"/Users/ann/p","id":"x"}`))
	f.Add([]byte(`{"cwd" : "/Users/ann" , "parentSession":"/Users/ann/x.jsonl"}`))
	f.Add([]byte(`{"parentSession":"/Users/ann/.pi/--Users-ann--/p.jsonl","cwd":"/Users/ann"}`))
	m, _ := ParsePathMap("/Users/ann=/home/ann")
	f.Fuzz(func(t *testing.T, raw []byte) {
		out, _, err := mapHeader(raw, m, "/r", "--Users-ann--/f.jsonl")
		if err != nil {
			return
		}
		if !jsonValid(out) && jsonValid(raw) {
			t.Fatalf("valid header %q became invalid %q", raw, out)
		}
	})
}

// TestSafeMkdirLinks: a project folder the user linked directly in the
// sessions dir is followed; a link anywhere deeper that leads out of the
// root is refused, and nothing is created through it.
func TestSafeMkdirLinks(t *testing.T) {
	root, outside := t.TempDir(), t.TempDir()
	if err := os.Symlink(outside, filepath.Join(root, "--linked--")); err != nil {
		t.Fatal(err)
	}
	if err := safeMkdir(root, filepath.Join(root, "--linked--")); err != nil {
		t.Errorf("linked project folder refused: %v", err)
	}
	if err := safeMkdir(root, filepath.Join(root, "--plain--")); err != nil {
		t.Errorf("plain project folder refused: %v", err)
	}
	// Deeper than a project folder: through the link, and a link inside
	// a real folder.
	deep := filepath.Join(root, "--linked--", "sub")
	if err := safeMkdir(root, deep); !errors.Is(err, ErrUnsafe) {
		t.Errorf("safeMkdir(%s) = %v, want ErrUnsafe", deep, err)
	}
	if _, err := os.Lstat(filepath.Join(outside, "sub")); err == nil {
		t.Error("a folder was created through the link before the refusal")
	}
	if err := os.Symlink(outside, filepath.Join(root, "--plain--", "out")); err != nil {
		t.Fatal(err)
	}
	if err := safeMkdir(root, filepath.Join(root, "--plain--", "out")); !errors.Is(err, ErrUnsafe) {
		t.Errorf("a link below a project folder: %v, want ErrUnsafe", err)
	}
	// A dangling link is not a folder.
	if err := os.Symlink(filepath.Join(outside, "gone"), filepath.Join(root, "--dangling--")); err != nil {
		t.Fatal(err)
	}
	if err := safeMkdir(root, filepath.Join(root, "--dangling--")); err == nil {
		t.Error("a dangling link accepted")
	}
}

// TestFreeNameKeepsEarlierCopies: a second copy of the same file trashed
// within the same second gets a name of its own.
func TestFreeNameKeepsEarlierCopies(t *testing.T) {
	dir := t.TempDir()
	name := "20261130T000000Z_--p--_s.jsonl"
	var got []string
	for i := 0; i < 3; i++ {
		p := freeName(dir, name)
		if err := os.WriteFile(p, []byte{byte(i)}, 0o600); err != nil {
			t.Fatal(err)
		}
		got = append(got, filepath.Base(p))
	}
	want := []string{name, "20261130T000000Z_--p--_s-1.jsonl", "20261130T000000Z_--p--_s-2.jsonl"}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("names %q, want %q", got, want)
		}
	}
}
