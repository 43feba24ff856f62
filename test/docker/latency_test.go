//go:build docker

package docker

import (
	"fmt"
	"io"
	"os"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestLatency measures append -> line on the other workstation through the
// hub cluster (fsnotify, PI_LOCAL, forwarder, PI_HUB R3, PI_ALL mirror,
// replicator), one append at a time, in both directions.
// PISYNC_DOCKER_LATENCY_N sets the number of appends (default 200).
func TestLatency(t *testing.T) {
	n := 200
	if v, err := strconv.Atoi(os.Getenv("PISYNC_DOCKER_LATENCY_N")); err == nil && v > 0 {
		n = v
	}
	s := newStack(t)
	l := newLedger()
	sid := "0199a7e0-0000-7000-8000-000000000001"
	src := sessionPath(s.sessions("ws1"), "/work/lat", sid)
	dst := sessionPath(s.sessions("ws2"), "/work/lat", sid)
	l.append(t, "ws1", sid, src, hdrLine(sid, "/work/lat"), msgLine("root", "", "start"))
	waitFile(t, dst, 2, time.Minute)

	for _, dir := range []struct{ from, to, fromPath, toPath string }{
		{"ws1", "ws2", src, dst},
		{"ws2", "ws1", dst, src},
	} {
		tail := &tailer{path: dir.toPath}
		tail.poll() // skip what is there
		var lat []time.Duration
		parent := "root"
		for i := 0; i < n; i++ {
			id := fmt.Sprintf("%s-%04d", dir.from, i)
			line := msgLine(id, parent, fmt.Sprintf("latency probe %d", i))
			parent = id
			start := time.Now()
			l.append(t, dir.from, sid, dir.fromPath, line)
			deadline := start.Add(30 * time.Second)
			for !tail.has(line) {
				if time.Now().After(deadline) {
					t.Fatalf("%s -> %s: append %d not there after 30s", dir.from, dir.to, i)
				}
				time.Sleep(500 * time.Microsecond)
			}
			lat = append(lat, time.Since(start))
		}
		sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
		q := func(p float64) time.Duration { return lat[int(p*float64(len(lat)-1))].Round(100 * time.Microsecond) }
		t.Logf("FIGURE latency %s -> %s over %d appends: p50 %v, p90 %v, p99 %v, max %v",
			dir.from, dir.to, n, q(0.50), q(0.90), q(0.99), lat[len(lat)-1].Round(100*time.Microsecond))
	}
	waitFor(t, time.Minute, func() (bool, string) { return l.check(s) })
	waitFor(t, 30*time.Second, func() (bool, string) { return l.checkPublishedOnce(s) })
}

// tailer reads what is appended to a file and remembers its lines.
type tailer struct {
	path    string
	off     int64
	partial string
	lines   map[string]bool
}

func (tl *tailer) poll() {
	if tl.lines == nil {
		tl.lines = map[string]bool{}
	}
	f, err := os.Open(tl.path)
	if err != nil {
		return
	}
	defer f.Close()
	if _, err := f.Seek(tl.off, io.SeekStart); err != nil {
		return
	}
	b, _ := io.ReadAll(f)
	tl.off += int64(len(b))
	parts := strings.Split(tl.partial+string(b), "\n")
	tl.partial = parts[len(parts)-1]
	for _, l := range parts[:len(parts)-1] {
		tl.lines[l] = true
	}
}

func (tl *tailer) has(line string) bool {
	tl.poll()
	return tl.lines[line]
}
