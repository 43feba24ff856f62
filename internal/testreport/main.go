// Command testreport reads `go test -json` on its standard input and prints
// what `go test` alone would print (each package's result line, the output
// of failed tests, build errors), then every skipped test with the reason
// it gave, then one closing line: "N passed, N failed, N skipped".
//
// Plain `go test ./...` shows a skip only when a package fails or with -v,
// so a test that needs node or Docker and skipped looked like one that
// passed. scripts/test (the README's test command) runs the module's tests
// through this. It exits 1 when a test or a package failed; with -ci also
// when a test skipped that is not allowed to (-allow-skip), because in CI
// everything that can run must run.
package main

import (
	"bufio"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"regexp"
	"strings"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}

func run(args []string, in io.Reader, out, errOut io.Writer) int {
	fs := flag.NewFlagSet("testreport", flag.ContinueOnError)
	fs.SetOutput(errOut)
	ci := fs.Bool("ci", false, "fail on any skip that -allow-skip does not name")
	allow := fs.String("allow-skip", "", "regular expression of tests that may skip even in CI (e.g. helper processes)")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	var allowRe *regexp.Regexp
	if *allow != "" {
		var err error
		if allowRe, err = regexp.Compile(*allow); err != nil {
			fmt.Fprintf(errOut, "testreport: -allow-skip: %v\n", err)
			return 2
		}
	}
	r := newReport(out)
	if err := r.read(in); err != nil {
		fmt.Fprintf(errOut, "testreport: %v\n", err)
		return 1
	}
	return r.finish(*ci, allowRe)
}

// event is one line of `go test -json` (cmd/test2json).
type event struct {
	Action     string
	Package    string
	Test       string
	Output     string
	ImportPath string // build-output and build-fail
}

// test is one test or subtest, with its output in arrival order.
type test struct {
	name   string
	result string // pass, fail, skip; "" while running
	status string // its "--- FAIL: …" line
	items  []item
}

// item is a line of output or a subtest, so that a failed test prints
// with its subtests where go test would put them.
type item struct {
	line string
	sub  *test
}

type pkg struct {
	tests map[string]*test
	top   []*test
	lines []string // the package's own output (ok, FAIL, panics)
}

type skip struct{ pkg, test, reason string }

type report struct {
	out           io.Writer
	pkgs          map[string]*pkg
	passed        int
	failed        int
	failedPkgs    []string
	skips         []skip
	sawFailedTest map[string]bool
}

func newReport(out io.Writer) *report {
	return &report{out: out, pkgs: map[string]*pkg{}, sawFailedTest: map[string]bool{}}
}

func (r *report) read(in io.Reader) error {
	sc := bufio.NewScanner(in)
	sc.Buffer(make([]byte, 1<<20), 64<<20)
	for sc.Scan() {
		line := sc.Bytes()
		var ev event
		if len(line) == 0 || line[0] != '{' || json.Unmarshal(line, &ev) != nil {
			// Not test2json: go test printed it itself (a vet or
			// set-up error). Pass it on as it is.
			fmt.Fprintf(r.out, "%s\n", line)
			continue
		}
		r.add(&ev)
	}
	return sc.Err()
}

func (r *report) pkg(name string) *pkg {
	p := r.pkgs[name]
	if p == nil {
		p = &pkg{tests: map[string]*test{}}
		r.pkgs[name] = p
	}
	return p
}

func (r *report) add(ev *event) {
	switch ev.Action {
	case "build-output":
		io.WriteString(r.out, ev.Output)
		return
	case "build-fail":
		return
	}
	if ev.Package == "" {
		return
	}
	p := r.pkg(ev.Package)
	if ev.Test == "" {
		switch ev.Action {
		case "output":
			p.lines = append(p.lines, ev.Output)
		case "pass", "fail", "skip":
			r.endPackage(ev.Package, p, ev.Action)
		}
		return
	}
	t := p.test(ev.Test)
	switch ev.Action {
	case "output":
		switch {
		case framing(ev.Output):
		case strings.HasPrefix(strings.TrimSpace(ev.Output), "--- ") && strings.Contains(ev.Output, " "+ev.Test+" ("):
			t.status = ev.Output
		default:
			t.items = append(t.items, item{line: ev.Output})
		}
	case "pass":
		t.result = "pass"
		r.passed++
	case "fail":
		t.result = "fail"
		r.failed++
		r.sawFailedTest[ev.Package] = true
	case "skip":
		t.result = "skip"
		r.skips = append(r.skips, skip{ev.Package, ev.Test, t.reason()})
	}
}

// test finds or makes a test, hanging a subtest under its parent.
func (p *pkg) test(name string) *test {
	if t := p.tests[name]; t != nil {
		return t
	}
	t := &test{name: name}
	p.tests[name] = t
	if i := strings.LastIndex(name, "/"); i > 0 {
		parent := p.test(name[:i])
		parent.items = append(parent.items, item{sub: t})
	} else {
		p.top = append(p.top, t)
	}
	return t
}

// framing is test2json's run/pause/continue markers, which go test without
// -v does not print.
func framing(s string) bool {
	for _, f := range []string{"=== RUN", "=== PAUSE", "=== CONT", "=== NAME"} {
		if strings.HasPrefix(s, f) {
			return true
		}
	}
	return false
}

// reason is what a skipped test said: its own lines, without indentation.
func (t *test) reason() string {
	var parts []string
	for _, it := range t.items {
		if it.sub == nil {
			if s := strings.TrimSpace(it.line); s != "" {
				parts = append(parts, s)
			}
		}
	}
	if len(parts) == 0 {
		return "(no reason given)"
	}
	return strings.Join(parts, " ")
}

// endPackage prints a package as go test does once it is done: the output
// of its failed tests (and of tests that never finished, when the package
// failed: a panic or a timeout), then its own lines.
func (r *report) endPackage(name string, p *pkg, action string) {
	for _, t := range p.top {
		if t.result == "fail" || (action == "fail" && t.result == "") {
			t.print(r.out, 0)
		}
	}
	for _, l := range p.lines {
		if l == "PASS\n" {
			continue
		}
		io.WriteString(r.out, l)
	}
	if action == "fail" && !r.sawFailedTest[name] {
		r.failedPkgs = append(r.failedPkgs, name)
	}
	delete(r.pkgs, name)
}

func (t *test) print(w io.Writer, depth int) {
	indent := strings.Repeat("    ", depth)
	if t.status != "" {
		io.WriteString(w, indent+t.status)
	} else {
		fmt.Fprintf(w, "%s--- %s: %s (did not finish)\n", indent, "FAIL", t.name)
	}
	for _, it := range t.items {
		switch {
		case it.sub == nil:
			io.WriteString(w, indent+it.line)
		case it.sub.result == "fail" || it.sub.result == "":
			it.sub.print(w, depth+1)
		}
	}
}

// finish prints the skips and the closing line and returns the exit code.
func (r *report) finish(ci bool, allow *regexp.Regexp) int {
	// Packages whose end never came (go test was killed): what they
	// printed is all there is.
	for name, p := range r.pkgs {
		r.endPackage(name, p, "fail")
	}
	var forbidden []skip
	if len(r.skips) > 0 {
		fmt.Fprintln(r.out, "\nskipped:")
		for _, s := range r.skips {
			fmt.Fprintf(r.out, "  %s %s: %s\n", s.pkg, s.test, s.reason)
			if ci && (allow == nil || !allow.MatchString(s.test)) {
				forbidden = append(forbidden, s)
			}
		}
	}
	for _, p := range r.failedPkgs {
		fmt.Fprintf(r.out, "package failed: %s\n", p)
	}
	failed := r.failed + len(r.failedPkgs)
	code := 0
	if failed > 0 {
		code = 1
	}
	if len(forbidden) > 0 {
		fmt.Fprintf(r.out, "\nCI runs every test (node and Docker are installed here), but %d skipped:\n", len(forbidden))
		for _, s := range forbidden {
			fmt.Fprintf(r.out, "  %s %s\n", s.pkg, s.test)
		}
		code = 1
	}
	fmt.Fprintf(r.out, "\n%d passed, %d failed, %d skipped\n", r.passed, failed, len(r.skips))
	return code
}
