// Package testenv finds what tests need: the conformance corpus and the
// real pi session code in the module's testdata/, and the node binary that
// runs it; and it plays a rogue node against a hub (Attacker). Tests that
// need node skip with a clear message where it is missing, except under
// CI=true, where that is a failure: CI must run every tier.
package testenv

import (
	"bytes"
	"context"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"
)

// TestdataDir returns the module's top-level testdata/ folder: the
// conformance corpus and the real pi session code (pi-oracle), kept in the
// repository so that a fresh clone runs every test with nothing beside it.
func TestdataDir(tb testing.TB) string {
	tb.Helper()
	dir, err := os.Getwd()
	if err != nil {
		tb.Fatalf("testenv: getwd: %v", err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return filepath.Join(dir, "testdata")
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			tb.Fatalf("testenv: no go.mod above %s", dir)
		}
		dir = parent
	}
}

// ConformanceDir returns the conformance corpus: session files and what
// real pi computes for them (testdata/conformance; PISYNC_CONFORMANCE_DIR
// overrides it, to run the tests against a newer corpus).
func ConformanceDir(tb testing.TB) string {
	tb.Helper()
	if d := os.Getenv("PISYNC_CONFORMANCE_DIR"); d != "" {
		return d
	}
	return filepath.Join(TestdataDir(tb), "conformance")
}

// Oracle returns the path of the pi-oracle launcher (testdata/pi-oracle;
// PISYNC_ORACLE overrides it). Without node the test skips, saying so,
// except under CI=true, where every tier must run: there it fails.
func Oracle(tb testing.TB) string {
	tb.Helper()
	if _, err := exec.LookPath("node"); err != nil {
		if os.Getenv("CI") == "true" {
			tb.Fatalf("testenv: node is not installed, and CI must run the tests that run real pi (pi-oracle)")
		}
		tb.Skip("testenv: node is not installed; skipping the test that runs real pi (pi-oracle)")
	}
	if p := os.Getenv("PISYNC_ORACLE"); p != "" {
		return p
	}
	return filepath.Join(TestdataDir(tb), "pi-oracle", "pi-oracle")
}

// RunOracle runs pi-oracle with args under a deadline and returns its
// standard output. A non-zero exit is an error that carries stderr.
func RunOracle(tb testing.TB, timeout time.Duration, args ...string) ([]byte, error) {
	tb.Helper()
	oracle := Oracle(tb)
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, "node", append([]string{oracle}, args...)...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return out, fmt.Errorf("pi-oracle %v: %w: %s", args, err, stderr.String())
	}
	return out, nil
}

// WaitFor polls cond until it holds or d passes, then fails the test with
// cond's last explanation. It is how tests wait: never a bare sleep.
func WaitFor(tb testing.TB, d time.Duration, cond func() (bool, string)) {
	tb.Helper()
	deadline := time.Now().Add(d)
	var why string
	for time.Now().Before(deadline) {
		var ok bool
		if ok, why = cond(); ok {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	tb.Fatalf("condition not met within %v: %s", d, why)
}

// Within runs f and fails tb unless it returns within d: a call that may
// hang (a read of a named pipe, say) fails the test, not the whole run. f
// runs on a goroutine of its own, so it must not call tb.Fatal.
func Within(tb testing.TB, d time.Duration, what string, f func()) {
	tb.Helper()
	done := make(chan struct{})
	go func() {
		defer close(done)
		f()
	}()
	select {
	case <-done:
	case <-time.After(d):
		tb.Fatalf("%s: no answer within %v", what, d)
	}
}

// EnvInt is the whole number the environment variable name holds, def when
// it is unset; a benchmark's knob outside [lo, hi] (or not a number) fails
// tb, naming the variable and the range.
func EnvInt(tb testing.TB, name string, def, lo, hi int) int {
	tb.Helper()
	s := os.Getenv(name)
	if s == "" {
		return def
	}
	v, err := strconv.Atoi(s)
	if err != nil || v < lo || v > hi {
		if hi == math.MaxInt {
			tb.Fatalf("%s=%q: want a whole number ≥ %d", name, s, lo)
		}
		tb.Fatalf("%s=%q: want a whole number from %d to %d", name, s, lo, hi)
	}
	return v
}
