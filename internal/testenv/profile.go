package testenv

import (
	"os"
	"runtime/pprof"
	"syscall"
	"testing"
	"time"
)

// CPUProfile writes a CPU profile of what runs until stop is called to the
// file the environment variable env names, and does nothing when it is
// unset: a benchmark profiles the phase it measures, not its set-up.
func CPUProfile(tb testing.TB, env string) (stop func()) {
	tb.Helper()
	path := os.Getenv(env)
	if path == "" {
		return func() {}
	}
	f, err := os.Create(path)
	if err != nil {
		tb.Fatal(err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		tb.Fatal(err)
	}
	return func() {
		pprof.StopCPUProfile()
		f.Close()
	}
}

// ProcessCPU is the CPU time (user and system) this process has used so
// far, every thread: the embedded server's work included.
func ProcessCPU(tb testing.TB) time.Duration {
	tb.Helper()
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		tb.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
