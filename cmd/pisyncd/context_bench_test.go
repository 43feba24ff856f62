package main

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/pisyncd/pisyncd/config"
	"github.com/pisyncd/pisyncd/internal/testenv"
)

// BenchmarkContextFile: `pisync context FILE --json`, one shot (process
// start included, as a user pays it), against real pi's context of the
// same file (`pi-oracle context FILE`: node and pi's own loader), in the
// same run, ABBA-interleaved with pisyncd's `context FILE --json` (the same
// code in the full binary, whose start alone costs more than pisync's whole
// answer). The file is a 10,000-entry session (about 6 MB: user,
// assistant with a tool call, tool result, a compaction every 2,700)
// written by pi's own writer (pi-oracle write), so the benchmark needs node
// and skips without it (PISYNC_ORACLE: the oracle's path). It reports the
// medians and x-faster, pi's time over pisync's (pisyncd-x-faster: over
// pisyncd's). PISYNC_BENCH_BIN runs another pisyncd (an older build)
// instead of this package's, PISYNC_BENCH_CLIENT another pisync instead of
// ../pisync's; PISYNC_BENCH_ROUNDS sets the rounds (default 10).
//
//	go test -run '^$' -bench ContextFile -benchtime=1x ./cmd/pisyncd/
func BenchmarkContextFile(b *testing.B) {
	oracle := testenv.Oracle(b)
	if _, err := os.Stat(oracle); err != nil {
		b.Skipf("pi-oracle not found at %s (PISYNC_ORACLE): %v", oracle, err)
	}
	bin := os.Getenv("PISYNC_BENCH_BIN")
	if bin == "" {
		bin = buildPisyncd(b)
	}
	client := os.Getenv("PISYNC_BENCH_CLIENT")
	if client == "" {
		client = buildPisync(b)
	}
	rounds := testenv.EnvInt(b, "PISYNC_BENCH_ROUNDS", 10, 1, math.MaxInt)
	file := piSessionFile(b, 10_000)
	st, err := os.Stat(file)
	if err != nil {
		b.Fatal(err)
	}

	// All three answer the same context (the window's ids), checked once;
	// both binaries of ours print the same bytes.
	ours := runOnce(b, client, "context", file, "--json")
	if full := runOnce(b, bin, "context", file, "--json"); !bytes.Equal(ours, full) {
		b.Fatalf("pisync and pisyncd print different contexts (%d and %d bytes)", len(ours), len(full))
	}
	theirs := runOnce(b, "node", oracle, "context", file)
	var a, p struct {
		LeafID          string   `json:"leafId"`
		ContextEntryIDs []string `json:"contextEntryIds"`
	}
	if err := json.Unmarshal(ours, &a); err != nil {
		b.Fatalf("pisync context: %v", err)
	}
	if err := json.Unmarshal(theirs, &p); err != nil {
		b.Fatalf("pi-oracle context: %v", err)
	}
	if a.LeafID != p.LeafID || !slices.Equal(a.ContextEntryIDs, p.ContextEntryIDs) {
		b.Fatalf("pisync and pi disagree: leaf %s/%s, %d/%d entries", a.LeafID, p.LeafID, len(a.ContextEntryIDs), len(p.ContextEntryIDs))
	}

	for b.Loop() {
		var us, full, pi, start, fullStart []time.Duration
		for r := 0; r < rounds; r++ {
			// ABCCBA: each runs first and last in turn, and every pair
			// sees the same mix of neighbours.
			us = append(us, timeRun(b, client, "context", file, "--json"))
			pi = append(pi, timeRun(b, "node", oracle, "context", file))
			full = append(full, timeRun(b, bin, "context", file, "--json"))
			full = append(full, timeRun(b, bin, "context", file, "--json"))
			pi = append(pi, timeRun(b, "node", oracle, "context", file))
			us = append(us, timeRun(b, client, "context", file, "--json"))
			start = append(start, timeRun(b, client, "version"))
			fullStart = append(fullStart, timeRun(b, bin, "version"))
		}
		mu, mf, mp, ms, mfs := median(us), median(full), median(pi), median(start), median(fullStart)
		b.ReportMetric(float64(st.Size())/1e6, "file-MB")
		b.ReportMetric(float64(len(ours))/1e6, "output-MB")
		b.ReportMetric(float64(len(a.ContextEntryIDs)), "window-entries")
		b.ReportMetric(ms.Seconds()*1e3, "start-ms")
		b.ReportMetric(mfs.Seconds()*1e3, "pisyncd-start-ms")
		b.ReportMetric(mu.Seconds()*1e3, "pisync-ms")
		b.ReportMetric(mf.Seconds()*1e3, "pisyncd-ms")
		b.ReportMetric(mp.Seconds()*1e3, "pi-ms")
		b.ReportMetric(float64(mp)/float64(mu), "x-faster")
		b.ReportMetric(float64(mp)/float64(mf), "pisyncd-x-faster")
		b.Logf("pisync %v (%v–%v), pisyncd %v (%v–%v), pi %v (%v–%v), process start %v (pisyncd %v): %.1f× faster (pisyncd %.1f×)",
			mu, slices.Min(us), slices.Max(us), mf, slices.Min(full), slices.Max(full), mp, slices.Min(pi), slices.Max(pi),
			ms, mfs, float64(mp)/float64(mu), float64(mp)/float64(mf))
	}
}

// buildPisync builds the lean client (cmd/pisync) into a temporary dir.
func buildPisync(t testing.TB) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "pisync")
	build := exec.Command("go", "build", "-o", bin, "../pisync")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build ../pisync: %v\n%s", err, out)
	}
	return bin
}

// piSessionFile writes a linear session of n entries with pi's writer
// (pi-oracle write) and returns its path.
func piSessionFile(b *testing.B, n int) string {
	b.Helper()
	pad := strings.Repeat("lorem ipsum dolor sit amet consectetur adipiscing elit sed do eiusmod tempor incididunt ut labore ", 3)
	steps := []map[string]any{
		{"op": "model_change", "provider": "anthropic", "modelId": "claude-sonnet-4-5"},
		{"op": "thinking_level_change", "thinkingLevel": "off"},
	}
	for i := 0; len(steps) < n; i++ {
		var s map[string]any
		switch i % 3 {
		case 0:
			s = map[string]any{"op": "user", "text": fmt.Sprintf("question %d %s", i, pad)}
			if i%900 == 0 {
				s["as"] = fmt.Sprintf("u%d", i)
			}
		case 1:
			s = map[string]any{"op": "assistant", "text": fmt.Sprintf("answer %d %s", i, pad),
				"toolCalls": []any{map[string]any{"id": fmt.Sprintf("c%d", i), "name": "bash", "arguments": map[string]any{"command": fmt.Sprintf("ls %d", i)}}}}
		default:
			s = map[string]any{"op": "toolResult", "toolCallId": fmt.Sprintf("c%d", i-1), "toolName": "bash", "text": fmt.Sprintf("out %d %s", i, pad)}
		}
		steps = append(steps, s)
		if i > 0 && i%2700 == 0 {
			steps = append(steps, map[string]any{"op": "compaction", "summary": fmt.Sprintf("summary %d", i), "firstKeptEntryId": fmt.Sprintf("@u%d", i-900), "tokensBefore": 1000})
		}
	}
	dir := b.TempDir()
	script, err := json.Marshal(steps)
	if err != nil {
		b.Fatal(err)
	}
	sp := filepath.Join(dir, "script.json")
	if err := os.WriteFile(sp, script, 0o600); err != nil {
		b.Fatal(err)
	}
	out, err := testenv.RunOracle(b, 5*time.Minute, "write", filepath.Join(dir, "sessions"), "--cwd", "/bench", "--script", sp)
	if err != nil {
		b.Fatal(err)
	}
	lines := bytes.Split(bytes.TrimSpace(out), []byte("\n"))
	var sum struct {
		Done        bool   `json:"done"`
		SessionFile string `json:"sessionFile"`
	}
	if json.Unmarshal(lines[len(lines)-1], &sum) != nil || !sum.Done {
		b.Fatalf("pi-oracle write: no summary in %.500s", lines[len(lines)-1])
	}
	return sum.SessionFile
}

func runOnce(b *testing.B, name string, args ...string) []byte {
	b.Helper()
	out, err := exec.Command(name, args...).Output()
	if err != nil {
		b.Fatalf("%s %v: %v", name, args, err)
	}
	return out
}

// timeRun is the wall time of one run of the command, its output
// discarded (read, as a pipe would be).
func timeRun(b *testing.B, name string, args ...string) time.Duration {
	b.Helper()
	cmd := exec.Command(name, args...)
	var out bytes.Buffer
	cmd.Stdout = &out
	start := time.Now()
	if err := cmd.Run(); err != nil {
		b.Fatalf("%s %v: %v", name, args, err)
	}
	return time.Since(start)
}

func median(d []time.Duration) time.Duration {
	s := slices.Clone(d)
	slices.Sort(s)
	return s[len(s)/2]
}

// BenchmarkDaemonContext: `pisyncd context SESSION --json` answered by the
// running daemon for a 100,000-entry session of 2 KB lines (219 MB, one
// branch, so the window is every entry and the query reads every body from
// the store), against one sequential read of the session file (the same
// bytes, from the page cache: the floor of any answer) in the same run,
// ABBA-interleaved. It reports the medians, their ratio (x-raw), and the
// daemon's peak resident set during the queries against its memory budget
// (the default). The answer is checked against `pisyncd context FILE`
// once. PISYNC_BENCH_BIN runs another binary; PISYNC_BENCH_ROUNDS sets the
// rounds (default 3).
//
//	go test -run '^$' -bench DaemonContext -benchtime=1x -timeout 30m ./cmd/pisyncd/
func BenchmarkDaemonContext(b *testing.B) {
	bin := os.Getenv("PISYNC_BENCH_BIN")
	if bin == "" {
		bin = buildPisyncd(b)
	}
	rounds := testenv.EnvInt(b, "PISYNC_BENCH_ROUNDS", 3, 1, math.MaxInt)
	home := b.TempDir()
	sessions, state := filepath.Join(home, "sessions"), filepath.Join(home, "state")
	budget := config.DefaultMemoryBudget
	env := append(os.Environ(), "PISYNC_SESSIONS_DIR="+sessions, "PISYNC_STATE_DIR="+state,
		"PISYNC_LOG_LEVEL=warn", fmt.Sprintf("PISYNC_MEMORY_BUDGET=%d", budget), "GOMEMLIMIT=")
	const sid = "0199ffff-0000-7000-8000-00000000000c"
	const lines = 100_000
	path := filepath.Join(sessions, "--ctx--", "2026-11-30T00-00-00-000Z_"+sid+".jsonl")
	size := writeMemSession(b, path, sid, 0, lines)
	d := startMemDaemon(b, bin, env)
	defer d.stop(b)
	start := time.Now()
	waitProjected(b, bin, env, 1+lines)
	b.Logf("%.0f MB projected in %v", float64(size)/1e6, time.Since(start).Round(time.Second))
	if got, want := daemonContext(b, bin, env, sid), fileContext(b, bin, env, path); got != want {
		b.Fatalf("the daemon's context is %s, the file's %s", got, want)
	}

	query := func() time.Duration {
		cmd := exec.Command(bin, "context", sid, "--json")
		cmd.Env = env
		h := &countingHash{Hash: sha256.New()} // a reader that does something with the bytes
		cmd.Stdout = h
		start := time.Now()
		if err := cmd.Run(); err != nil {
			b.Fatalf("pisyncd context %s: %v\n%s", sid, err, d.stderr.String())
		}
		return time.Since(start)
	}
	raw := func() time.Duration {
		start := time.Now()
		f, err := os.Open(path)
		if err != nil {
			b.Fatal(err)
		}
		defer f.Close()
		if _, err := io.Copy(io.Discard, bufio.NewReaderSize(f, 1<<20)); err != nil {
			b.Fatal(err)
		}
		return time.Since(start)
	}
	for b.Loop() {
		d.resetHWM(b)
		base := d.rss(b)
		var qs, rs []time.Duration
		for range rounds {
			qs = append(qs, query())
			rs = append(rs, raw(), raw())
			qs = append(qs, query())
		}
		peak := d.hwm(b)
		mq, mr := median(qs), median(rs)
		b.ReportMetric(float64(size)/1e6, "file-MB")
		b.ReportMetric(mq.Seconds(), "query-s")
		b.ReportMetric(mr.Seconds(), "raw-read-s")
		b.ReportMetric(float64(mq)/float64(mr), "x-raw")
		b.ReportMetric(float64(peak)/1e6, "query-peak-rss-MB")
		b.ReportMetric(float64(peak)/float64(budget), "of-budget")
		b.Logf("query %v (%v–%v), raw read %v, daemon RSS %.0f MB before, peak %.0f MB (%.0f%% of the budget)",
			mq, slices.Min(qs), slices.Max(qs), mr, float64(base)/1e6, float64(peak)/1e6, 100*float64(peak)/float64(budget))
	}
}
