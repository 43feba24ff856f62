package archtest

import (
	"bufio"
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

type pkg struct {
	ImportPath, Name, Dir, Doc string
	Imports, GoFiles           []string
}

// packages lists the module's packages as the go command sees them.
func packages(t *testing.T) []pkg {
	t.Helper()
	out, err := exec.Command("go", "list", "-json", "github.com/pisyncd/pisyncd/...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	var pkgs []pkg
	dec := json.NewDecoder(bytes.NewReader(out))
	for dec.More() {
		var p pkg
		if err := dec.Decode(&p); err != nil {
			t.Fatal(err)
		}
		pkgs = append(pkgs, p)
	}
	if len(pkgs) < 8 {
		t.Fatalf("go list found %d packages", len(pkgs))
	}
	return pkgs
}

const module = "github.com/pisyncd/pisyncd/"

// TestStructure: every package says what it is for; the session rules stay
// a pure core (standard library, no files, network or clock); test helpers
// never reach the binary; exits, the default HTTP mux and init-time
// registration appear nowhere but where they belong.
func TestStructure(t *testing.T) {
	forbidden := []struct {
		re   *regexp.Regexp
		what string
		main bool // allowed in package main
	}{
		{regexp.MustCompile(`\bos\.Exit\(`), "os.Exit", true},
		{regexp.MustCompile(`\blog\.Fatal`), "log.Fatal", false},
		{regexp.MustCompile(`\bhttp\.(HandleFunc|Handle)\(|DefaultServeMux`), "the default HTTP mux", false},
		{regexp.MustCompile(`^func init\(\)`), "an init function", false},
	}
	for _, p := range packages(t) {
		rel := strings.TrimPrefix(p.ImportPath, module)
		if p.Doc == "" {
			t.Errorf("%s: no package doc comment", rel)
		}
		for _, imp := range p.Imports {
			helper := rel == "internal/testenv" || rel == "internal/jstest" // test helpers
			if (!helper && (imp == module+"internal/testenv" || imp == module+"internal/jstest")) || (imp == "testing" && !helper) {
				t.Errorf("%s: non-test code imports %s", rel, imp)
			}
			if rel == "session" && (strings.Contains(strings.Split(imp, "/")[0], ".") ||
				imp == "os" || imp == "io/fs" || imp == "net" || strings.HasPrefix(imp, "net/") || imp == "os/exec") {
				t.Errorf("session: the pure core imports %s", imp)
			}
		}
		for _, f := range p.GoFiles {
			path := filepath.Join(p.Dir, f)
			fh, err := os.Open(path)
			if err != nil {
				t.Fatal(err)
			}
			sc := bufio.NewScanner(fh)
			sc.Buffer(make([]byte, 1<<20), 1<<20)
			for n := 1; sc.Scan(); n++ {
				line := sc.Text()
				if strings.HasPrefix(strings.TrimSpace(line), "//") {
					continue
				}
				if rel == "session" && strings.Contains(line, "time.Now(") {
					t.Errorf("%s/%s:%d: the pure core reads the clock", rel, f, n)
				}
				for _, fb := range forbidden {
					if fb.re.MatchString(line) && !(fb.main && p.Name == "main") {
						t.Errorf("%s/%s:%d: %s", rel, f, n, fb.what)
					}
				}
			}
			fh.Close()
		}
	}
}
