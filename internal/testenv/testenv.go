// Package testenv finds what tests need outside the module: the shared/
// folder (conformance corpus, pi-oracle) and the node binary that runs the
// oracle; and it plays a rogue node against a hub (Attacker). Tests skip
// with a clear message where something is missing, except under CI=true,
// where a missing shared/ folder is a failure: CI must run every tier.
package testenv

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

// SharedDir returns the project's shared/ folder: $PISYNC_SHARED_DIR, or the
// first ../shared found walking up from the working directory.
func SharedDir(tb testing.TB) string {
	tb.Helper()
	if d := os.Getenv("PISYNC_SHARED_DIR"); d != "" {
		return d
	}
	dir, err := os.Getwd()
	if err != nil {
		tb.Fatalf("testenv: getwd: %v", err)
	}
	for {
		cand := filepath.Join(dir, "..", "shared")
		if st, err := os.Stat(filepath.Join(cand, "conformance")); err == nil && st.IsDir() {
			abs, _ := filepath.Abs(cand)
			return abs
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			break
		}
		dir = parent
	}
	if os.Getenv("CI") == "true" {
		tb.Fatalf("testenv: shared/ not found beside the repository (set PISYNC_SHARED_DIR)")
	}
	tb.Skip("testenv: shared/ not found beside the repository (set PISYNC_SHARED_DIR); skipping")
	return ""
}

// ConformanceDir returns shared/conformance.
func ConformanceDir(tb testing.TB) string {
	tb.Helper()
	return filepath.Join(SharedDir(tb), "conformance")
}

// Oracle returns the path of the pi-oracle launcher, skipping the test when
// node is not installed.
func Oracle(tb testing.TB) string {
	tb.Helper()
	if _, err := exec.LookPath("node"); err != nil {
		tb.Skip("testenv: node is not installed; skipping the test that runs real pi (pi-oracle)")
	}
	return filepath.Join(SharedDir(tb), "tools", "pi-oracle", "pi-oracle")
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
