package main

import (
	"os"
	"testing"
)

// TestMain lets the test binary run as the pisyncd command itself, so
// process-level tests (SIGKILL, signals) exercise the real Main without
// building a second binary.
func TestMain(m *testing.M) {
	if os.Getenv("PISYNC_TEST_AS_MAIN") == "1" {
		os.Exit(Main(os.Args[1:], os.Stdout, os.Stderr))
	}
	os.Exit(m.Run())
}
