package main

import (
	"bytes"
	"os"
	"strings"
	"testing"
)

// TestReport: what go test prints (build errors, a failed test with its
// subtest, the package lines), then the skips with their reasons, then the
// closing line; exit 1 on a failure. testdata/mixed.json is the real
// output of `go test -json` for a package with a passing, a skipping and a
// failing test and one that does not build.
func TestReport(t *testing.T) {
	in, err := os.ReadFile("testdata/mixed.json")
	if err != nil {
		t.Fatal(err)
	}
	var out, errOut bytes.Buffer
	code := run(nil, bytes.NewReader(in), &out, &errOut)
	want := `# tj/b [tj/b.test]
b/b_test.go:3:28: undefined: undefined
FAIL	tj/b [build failed]
--- FAIL: TestFail (0.00s)
    a_test.go:5: before
    --- FAIL: TestFail/sub (0.00s)
        a_test.go:5: boom
FAIL
FAIL	tj	0.002s

skipped:
  tj TestSkip: a_test.go:4: no docker here
package failed: tj/b

2 passed, 3 failed, 1 skipped
`
	if code != 1 || out.String() != want {
		t.Errorf("exit %d, output:\n%s\nwant:\n%s", code, out.String(), want)
	}
}

const passingRun = `{"Action":"start","Package":"p"}
{"Action":"run","Package":"p","Test":"TestA"}
{"Action":"output","Package":"p","Test":"TestA","Output":"=== RUN   TestA\n"}
{"Action":"output","Package":"p","Test":"TestA","Output":"--- PASS: TestA (0.01s)\n"}
{"Action":"pass","Package":"p","Test":"TestA"}
{"Action":"run","Package":"p","Test":"TestHelper"}
{"Action":"output","Package":"p","Test":"TestHelper","Output":"    lock_test.go:17: helper process only\n"}
{"Action":"output","Package":"p","Test":"TestHelper","Output":"--- SKIP: TestHelper (0.00s)\n"}
{"Action":"skip","Package":"p","Test":"TestHelper"}
{"Action":"run","Package":"p","Test":"TestDocker"}
{"Action":"output","Package":"p","Test":"TestDocker","Output":"    stack_test.go:47: docker-compose is not installed; skipping the multi-host Docker tests\n"}
{"Action":"output","Package":"p","Test":"TestDocker","Output":"--- SKIP: TestDocker (0.00s)\n"}
{"Action":"skip","Package":"p","Test":"TestDocker"}
{"Action":"output","Package":"p","Output":"PASS\n"}
{"Action":"output","Package":"p","Output":"ok  \tp\t0.020s\n"}
{"Action":"pass","Package":"p"}
{"Action":"start","Package":"q"}
{"Action":"output","Package":"q","Output":"?   \tq\t[no test files]\n"}
{"Action":"skip","Package":"q"}
`

// TestReportSkipsInCI: a run with no failure exits 0 and lists its skips;
// with -ci a skip exits 1 unless -allow-skip names the test.
func TestReportSkipsInCI(t *testing.T) {
	for _, c := range []struct {
		args []string
		code int
		ci   string
	}{
		{nil, 0, ""},
		{[]string{"-ci", "-allow-skip", "^TestHelper$"}, 1, "CI runs every test (node and Docker are installed here), but 1 skipped:\n  p TestDocker\n"},
		{[]string{"-ci", "-allow-skip", "^(TestHelper|TestDocker)$"}, 0, ""},
	} {
		var out, errOut bytes.Buffer
		code := run(c.args, strings.NewReader(passingRun), &out, &errOut)
		s := out.String()
		if code != c.code {
			t.Errorf("%v: exit %d, want %d\n%s", c.args, code, c.code, s)
		}
		if !strings.HasPrefix(s, "ok  \tp\t0.020s\n?   \tq\t[no test files]\n\nskipped:\n") ||
			!strings.Contains(s, "  p TestDocker: stack_test.go:47: docker-compose is not installed; skipping the multi-host Docker tests\n") ||
			!strings.HasSuffix(s, "\n1 passed, 0 failed, 2 skipped\n") {
			t.Errorf("%v: output:\n%s", c.args, s)
		}
		if c.ci != "" && !strings.Contains(s, c.ci) {
			t.Errorf("%v: no CI verdict %q in:\n%s", c.args, c.ci, s)
		}
		if c.ci == "" && strings.Contains(s, "CI runs") {
			t.Errorf("%v: unexpected CI verdict:\n%s", c.args, s)
		}
	}
}

// TestReportUnfinished: a package that panicked or timed out prints the
// tests that never finished, and counts as failed.
func TestReportUnfinished(t *testing.T) {
	in := `{"Action":"run","Package":"p","Test":"TestSlow"}
{"Action":"output","Package":"p","Test":"TestSlow","Output":"    slow_test.go:9: waiting\n"}
{"Action":"output","Package":"p","Output":"panic: test timed out after 1s\n"}
{"Action":"output","Package":"p","Output":"FAIL\tp\t1.005s\n"}
{"Action":"fail","Package":"p"}
`
	var out bytes.Buffer
	code := run(nil, strings.NewReader(in), &out, &out)
	want := "--- FAIL: TestSlow (did not finish)\n    slow_test.go:9: waiting\npanic: test timed out after 1s\nFAIL\tp\t1.005s\npackage failed: p\n\n0 passed, 1 failed, 0 skipped\n"
	if code != 1 || out.String() != want {
		t.Errorf("exit %d:\n%s\nwant:\n%s", code, out.String(), want)
	}
}
