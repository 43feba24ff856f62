package main

import (
	"bufio"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"hash"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/pisyncd/pisyncd/config"
	"github.com/pisyncd/pisyncd/internal/testenv"
)

// memWorkload sizes one run of the daemon's memory measurement
// (docs/PERFORMANCE.md, Memory).
type memWorkload struct {
	budget  int64 // PISYNC_MEMORY_BUDGET
	maxLine int64 // PISYNC_MAX_LINE (0: its default)
	images  int   // entries of a session of 1–4 MB base64 images, present at start
	lines   int   // entries of 2 KB of text after them in the same session
	growing int   // bytes of one line written slowly while the daemon runs
	cold    bool  // also restart the daemon and query again (the tree rebuilt)
}

// memReport is what measureDaemonMemory found: the daemon's peak resident
// set (VmHWM, reset before each phase) in each phase.
type memReport struct {
	fileBytes                          int64
	ingest, growing, query, cold, base int64
	ingestTime                         time.Duration // from start until every line is projected
	phases                             []string
}

// TestDaemonMemoryBound runs the pisyncd binary (built without the race
// detector: the bound is the real daemon's) with PISYNC_MEMORY_BUDGET at
// 320 MiB and PISYNC_MAX_LINE at 16 MiB, the most that budget allows (its
// 256 MiB reserve leaves 64 MiB of work, whose quarter is the tailer's),
// on a small version of issue 9's workloads: a session of base64 images
// present at start, a line of 16 MB written slowly, and a context query
// of the images session. Proves that the daemon's peak resident set in
// each phase stays within the budget.
func TestDaemonMemoryBound(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("reads VmHWM from /proc")
	}
	r := measureDaemonMemory(t, memWorkload{budget: 320 << 20, maxLine: 16 << 20, images: 24, growing: 16_000_000})
	checkMemory(t, r, 320<<20)
}

// BenchmarkDaemonMemory is issue 9's workloads at full size, on the
// pisyncd binary with PISYNC_MEMORY_BUDGET and PISYNC_MAX_LINE at their
// defaults (512 and 64 MiB):
//
//   - images1GB: a session of 400 entries with a 1–4 MB base64 image each
//     (1 GB) present at start, then a 60 MB line written in 256 KiB pieces
//     (each followed by an fsync and a 2 ms pause), then a context query of
//     the 1 GB session, then the same after a restart (the tree rebuilt);
//   - images: the same with 80 image entries (210 MB);
//   - lines: a session of 100 000 entries of 2 KB (200 MB), then its
//     context, also after a restart.
//
// One per process (each starts its own daemon; the process is only the
// test's):
//
//	go test -run '^$' -bench 'DaemonMemory/images1GB$' -benchtime=1x -timeout 60m ./cmd/pisyncd/
//
// Reported: each phase's peak RSS in MB (10^6 bytes) and as a fraction of
// the budget, the RSS before the first query and the ingest's duration;
// fails when a phase's peak exceeds the budget.
func BenchmarkDaemonMemory(b *testing.B) {
	run := func(name string, w memWorkload) {
		b.Run(name, func(b *testing.B) {
			for b.Loop() {
				r := measureDaemonMemory(b, w)
				b.ReportMetric(float64(r.fileBytes)/1e6, "file-MB")
				b.ReportMetric(r.ingestTime.Seconds(), "ingest-s")
				for _, p := range []struct {
					name string
					v    int64
				}{{"ingest-peak", r.ingest}, {"growing-peak", r.growing}, {"query-base", r.base}, {"query-peak", r.query}, {"cold-peak", r.cold}} {
					if p.v > 0 {
						b.ReportMetric(float64(p.v)/1e6, p.name+"-rss-MB")
						b.ReportMetric(float64(p.v)/float64(w.budget), p.name+"-of-budget")
					}
				}
				checkMemory(b, r, w.budget)
			}
		})
	}
	const budget = config.DefaultMemoryBudget
	run("images1GB", memWorkload{budget: budget, images: 400, growing: 60_000_000, cold: true})
	run("images", memWorkload{budget: budget, images: 80, growing: 60_000_000, cold: true})
	run("lines", memWorkload{budget: budget, lines: 100_000, cold: true})
}

// checkMemory fails when a phase's peak resident set exceeds the budget:
// PISYNC_MEMORY_BUDGET is the bound on the whole daemon's.
func checkMemory(t testing.TB, r memReport, budget int64) {
	t.Helper()
	for i, v := range []int64{r.ingest, r.growing, r.query, r.cold} {
		if v == 0 {
			continue
		}
		t.Logf("%s: peak RSS %.1f MB, %.0f%% of the budget (%.1f MB)", r.phases[i], float64(v)/1e6, 100*float64(v)/float64(budget), float64(budget)/1e6)
		if v > budget {
			t.Errorf("%s: peak RSS %.1f MiB, more than the budget %d MiB", r.phases[i], float64(v)/(1<<20), budget>>20)
		}
	}
}

func measureDaemonMemory(t testing.TB, w memWorkload) memReport {
	bin := buildPisyncd(t)
	home := t.TempDir()
	sessions, state := filepath.Join(home, "sessions"), filepath.Join(home, "state")
	env := append(os.Environ(), "PISYNC_SESSIONS_DIR="+sessions, "PISYNC_STATE_DIR="+state,
		"PISYNC_LOG_LEVEL=warn", fmt.Sprintf("PISYNC_MEMORY_BUDGET=%d", w.budget), "GOMEMLIMIT=")
	if w.maxLine > 0 {
		env = append(env, fmt.Sprintf("PISYNC_MAX_LINE=%d", w.maxLine))
	}
	r := memReport{phases: []string{"ingest", "growing line", "context query", "context query after a restart"}}

	const sid = "0199ffff-0000-7000-8000-00000000000a"
	path := filepath.Join(sessions, "--mem--", "2026-11-30T00-00-00-000Z_"+sid+".jsonl")
	total := 1 + w.images + w.lines // lines, with the header
	r.fileBytes = writeMemSession(t, path, sid, w.images, w.lines)

	start := time.Now()
	d := startMemDaemon(t, bin, env)
	waitProjected(t, bin, env, total)
	r.ingest, r.ingestTime = d.hwm(t), time.Since(start)
	t.Logf("%d MB read, published and projected in %v", r.fileBytes/1e6, r.ingestTime.Round(time.Second))

	if w.growing > 0 {
		d.resetHWM(t)
		gpath := filepath.Join(sessions, "--mem--", "2026-11-30T00-00-01-000Z_growing.jsonl")
		writeGrowingLine(t, gpath, "0199ffff-0000-7000-8000-00000000000b", w.growing)
		total += 3 // a header, the line and a small one
		waitProjected(t, bin, env, total)
		r.growing = d.hwm(t)
	}

	want := fileContext(t, bin, env, path)
	query := func() int64 {
		d.resetHWM(t)
		got := daemonContext(t, bin, env, sid)
		if got != want {
			t.Fatalf("the daemon's context of %s is %s, the file's %s", sid, got, want)
		}
		return d.hwm(t)
	}
	r.base = d.rss(t)
	r.query = query()
	if w.cold {
		d.stop(t)
		d = startMemDaemon(t, bin, env)
		waitReady(t, bin, env)
		r.cold = query()
	}
	d.stop(t)
	return r
}

// buildPisyncd builds this package's command into a temporary dir.
func buildPisyncd(t testing.TB) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "pisyncd")
	build := exec.Command("go", "build", "-o", bin, ".")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

type memDaemon struct {
	cmd    *exec.Cmd
	done   chan error
	stderr *testenv.LogBuffer
}

func startMemDaemon(t testing.TB, bin string, env []string) *memDaemon {
	t.Helper()
	d := &memDaemon{cmd: exec.Command(bin, "run"), done: make(chan error, 1), stderr: &testenv.LogBuffer{}}
	d.cmd.Env = env
	d.cmd.Stderr = d.stderr
	if err := d.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { d.done <- d.cmd.Wait() }()
	t.Cleanup(func() {
		if d.cmd.ProcessState == nil {
			d.cmd.Process.Kill()
			<-d.done
		}
	})
	return d
}

func (d *memDaemon) stop(t testing.TB) {
	t.Helper()
	d.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-d.done:
		if err != nil {
			t.Fatalf("pisyncd: %v\n%s", err, d.stderr.String())
		}
	case <-time.After(time.Minute):
		t.Fatalf("pisyncd did not stop\n%s", d.stderr.String())
	}
}

// resetHWM makes VmHWM the current resident set (Linux 4.0 and later).
func (d *memDaemon) resetHWM(t testing.TB) {
	t.Helper()
	if err := os.WriteFile(fmt.Sprintf("/proc/%d/clear_refs", d.cmd.Process.Pid), []byte("5"), 0); err != nil {
		t.Fatal(err)
	}
}

func (d *memDaemon) hwm(t testing.TB) int64 { return d.status(t, "VmHWM") }
func (d *memDaemon) rss(t testing.TB) int64 { return d.status(t, "VmRSS") }

// status is a "kB" field of the daemon's /proc/PID/status, in bytes.
func (d *memDaemon) status(t testing.TB, name string) int64 {
	t.Helper()
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", d.cmd.Process.Pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(data), "\n") {
		if k, v, ok := strings.Cut(l, ":"); ok && k == name {
			var kb int64
			fmt.Sscan(strings.TrimSuffix(strings.TrimSpace(v), " kB"), &kb)
			return kb << 10
		}
	}
	t.Fatalf("no %s in /proc/PID/status", name)
	return 0
}

// waitProjected waits until the daemon has published and projected n
// lines in all.
func waitProjected(t testing.TB, bin string, env []string, n int) {
	t.Helper()
	testenv.WaitFor(t, 60*time.Minute, func() (bool, string) {
		cmd := exec.Command(bin, "status", "--json")
		cmd.Env = env
		out, err := cmd.Output()
		if err != nil {
			return false, fmt.Sprintf("status: %v", err)
		}
		var st Status
		if err := json.Unmarshal(out, &st); err != nil {
			return false, err.Error()
		}
		applied := st.Projection.Applied + st.Projection.Skipped
		return st.Tailer.LinesPublished >= int64(n) && applied >= int64(n),
			fmt.Sprintf("%d of %d lines published, %d projected", st.Tailer.LinesPublished, n, applied)
	})
}

// waitReady waits until the daemon answers status.
func waitReady(t testing.TB, bin string, env []string) {
	t.Helper()
	testenv.WaitFor(t, time.Minute, func() (bool, string) {
		cmd := exec.Command(bin, "status")
		cmd.Env = env
		out, err := cmd.CombinedOutput()
		return err == nil, string(out)
	})
}

// daemonContext is the sha-256 and length of `pisyncd context SID --json`
// answered by the daemon.
func daemonContext(t testing.TB, bin string, env []string, sid string) string {
	t.Helper()
	return hashCommand(t, bin, env, "context", sid, "--json")
}

// fileContext is the same read from the file by `pisyncd context FILE`.
func fileContext(t testing.TB, bin string, env []string, path string) string {
	t.Helper()
	return hashCommand(t, bin, env, "context", path, "--json")
}

func hashCommand(t testing.TB, bin string, env []string, args ...string) string {
	t.Helper()
	cmd := exec.Command(bin, args...)
	cmd.Env = env
	h := &countingHash{Hash: sha256.New()}
	var stderr testenv.LogBuffer
	cmd.Stdout, cmd.Stderr = h, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("pisyncd %v: %v\n%s", args, err, stderr.String())
	}
	return fmt.Sprintf("%s (%d bytes)", hex.EncodeToString(h.Sum(nil))[:16], h.n)
}

type countingHash struct {
	hash.Hash
	n int64
}

func (h *countingHash) Write(p []byte) (int, error) {
	h.n += int64(len(p))
	return h.Hash.Write(p)
}

// writeMemSession writes a session of images entries with a 1–4 MB base64
// image each (as pi stores screenshots), then lines entries of 2 KB of
// text, and returns its size.
func writeMemSession(t testing.TB, path, sid string, images, lines int) int64 {
	t.Helper()
	os.MkdirAll(filepath.Dir(path), 0o700)
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	bw := bufio.NewWriterSize(f, 1<<20)
	fmt.Fprintln(bw, hdrLine(sid, "/mem"))
	rng := rand.New(rand.NewChaCha8([32]byte{}))
	raw := make([]byte, 3<<20)
	text := strings.Repeat("lorem ipsum ", 2<<10/12)
	parent := ""
	for i := range images + lines {
		id := fmt.Sprintf("e%07d", i)
		l := msgLine(id, parent, "@@")
		if i < images {
			b := raw[:(1+i%4)<<20*3/4]
			for k := range b {
				b[k] = byte(rng.Uint32())
			}
			l = strings.Replace(l, `"content":"@@"`,
				`"content":[{"type":"text","text":"a screenshot"},{"type":"image","data":"`+base64.StdEncoding.EncodeToString(b)+`","mimeType":"image/png"}]`, 1)
		} else {
			l = strings.Replace(l, "@@", text, 1)
		}
		if !strings.Contains(l, `"id":"`+id+`"`) || strings.Contains(l, "@@") {
			t.Fatalf("entry template changed: %.200s", l)
		}
		fmt.Fprintln(bw, l)
		parent = id
	}
	if err := bw.Flush(); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	st, _ := os.Stat(path)
	return st.Size()
}

// writeGrowingLine writes a session whose second line is n bytes, written
// in 256 KiB pieces, each followed by an fsync and a 2 ms pause, as a slow
// writer streams a huge tool result; a small line follows it.
func writeGrowingLine(t testing.TB, path, sid string, n int) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	io.WriteString(f, hdrLine(sid, "/mem")+"\n")
	before, after, _ := strings.Cut(msgLine("big", "", "@@"), "@@")
	piece := strings.Repeat("x", 256<<10)
	line := before
	for written := len(before) + len(after); written < n; written += len(piece) {
		if _, err := io.WriteString(f, line); err != nil {
			t.Fatal(err)
		}
		line = piece[:min(len(piece), n-written)]
		f.Sync()
		time.Sleep(2 * time.Millisecond) // the writer's pace, not a synchronisation
	}
	io.WriteString(f, line+after+"\n")
	io.WriteString(f, msgLine("after", "big", "small")+"\n")
}
