package main

import (
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"
)

// TestNoGoroutineLeft: a hub and two replicating workstations, started and
// stopped in this process, leave no goroutine behind: every worker, the
// embedded servers and their connections are stopped and waited for.
func TestNoGoroutineLeft(t *testing.T) {
	before := runtime.NumGoroutine()
	func() {
		hub := startTestHub(t)
		a := newStation(t, "ws-a", hub.url(), "")
		b := newStation(t, "ws-b", hub.url(), "")
		writeSession(t, a, "leak-session", 3)
		waitFile(t, b, "leak-session", 4)
		b.stop()
		a.stop()
		hub.stop()
	}()
	var stacks string
	waitUntil(t, 20*time.Second, func() (bool, string) {
		n := runtime.NumGoroutine()
		if n <= before {
			return true, ""
		}
		buf := make([]byte, 1<<20)
		stacks = string(buf[:runtime.Stack(buf, true)])
		return false, fmt.Sprintf("%d goroutines, %d before; still running:\n%s", n, before, summarize(stacks))
	})
}

// summarize keeps the first frame of each goroutine's stack.
func summarize(stacks string) string {
	var out []string
	for _, g := range strings.Split(stacks, "\n\n") {
		lines := strings.Split(g, "\n")
		if len(lines) >= 2 {
			out = append(out, lines[0]+" "+strings.TrimSpace(lines[1]))
		}
	}
	return strings.Join(out, "\n")
}
