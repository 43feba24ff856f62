package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/pisyncd/pisyncd/eventlog"
	"github.com/pisyncd/pisyncd/eventlog/embedded"
	"github.com/pisyncd/pisyncd/internal/testenv"
)

// BenchmarkDaemonSessions runs the pisyncd binary (built without the race
// detector) on N small sessions present at start (a header and five
// entries of ~300 B each, over 50 --cwd-- folders) and measures the whole
// daemon: its first read (from start until every line is published AND
// projected: applied, and each session's five views handed to the store)
// against a raw atomic batch publish of the same lines into a fresh
// embedded server in the same run (eventlog.Local.PublishGroups, batches
// of up to MaxBatch messages, 8 publishers), ABBA; the CPU seconds each
// took (the daemon's from its start, the raw run's in this process); the projection's KV
// writes; the first read's peak resident set; then, with every session
// tracked, an idle stretch (no file changes) of PISYNC_BENCH_IDLE (default
// 60 s): the daemon's CPU seconds and context switches (wake-ups, all
// threads) per minute; and its resident set and Go heap (live, and the
// pages held for objects: status) after it; then the same idle
// stretch once more after the daemon is started again over its state. PISYNC_BENCH_BIN
// runs another pisyncd binary (a "before") with the same harness.
// PISYNC_BENCH_LIVE=1 writes the sessions while the daemon runs, once its
// start has settled (a burst in the middle of its life, not a first
// read): its idle figures are the ones to read then; its times include
// writing the files, so its ratios are not those of a first read.
//
//	go test -run '^$' -bench 'DaemonSessions/sessions=10000$' -benchtime=1x -timeout 30m ./cmd/pisyncd/
func BenchmarkDaemonSessions(b *testing.B) {
	for _, n := range []int{1000, 10000} {
		b.Run(fmt.Sprintf("sessions=%d", n), func(b *testing.B) {
			idle := time.Minute
			if v := os.Getenv("PISYNC_BENCH_IDLE"); v != "" {
				d, err := time.ParseDuration(v)
				if err != nil {
					b.Fatal(err)
				}
				idle = d
			}
			bin := os.Getenv("PISYNC_BENCH_BIN") // another build (a "before")
			live := os.Getenv("PISYNC_BENCH_LIVE") != ""
			if bin == "" {
				bin = buildPisyncd(b)
			}
			var daemon, pub, raw time.Duration
			var daemonCPU, rawCPU float64
			var r scaleReport
			for b.Loop() {
				d1, rep1 := daemonSessions(b, bin, n, 0, live)
				r1, c1 := rawSessions(b, n)
				r2, c2 := rawSessions(b, n)
				d2, rep := daemonSessions(b, bin, n, idle, live)
				b.Logf("CPU seconds: daemon %.2f, %.2f (%.2f, %.2f cores busy); raw %.2f, %.2f (%.2f, %.2f cores busy)",
					rep1.cpu, rep.cpu, rep1.cpu/d1.Seconds(), rep.cpu/d2.Seconds(), c1, c2, c1/r1.Seconds(), c2/r2.Seconds())
				b.Logf("daemon %v (published after %v), %v (%v); raw %v, %v; kv writes %d; peak RSS %.0f / %.0f MB; idle %.2f CPU-s/min, %.0f wake-ups/min; RSS %.0f MB before idle, %.0f MB after (mean %.0f, max %.0f); after a restart %.0f MB (mean %.0f, max %.0f)",
					d1.Round(time.Millisecond), rep1.published.Round(time.Millisecond), d2.Round(time.Millisecond), rep.published.Round(time.Millisecond), r1.Round(time.Millisecond), r2.Round(time.Millisecond),
					rep.kvWrites, rep1.rssPeak/1e6, rep.rssPeak/1e6, rep.idle.cpuPerMin, rep.idle.wakePerMin, rep.rssBefore/1e6, rep.idle.rss/1e6, rep.idle.rssMean/1e6, rep.idle.rssMax/1e6,
					rep.restart.rss/1e6, rep.restart.rssMean/1e6, rep.restart.rssMax/1e6)
				daemon += d1 + d2
				pub += rep1.published + rep.published
				raw += r1 + r2
				daemonCPU += rep1.cpu + rep.cpu
				rawCPU += c1 + c2
				r = rep
			}
			lines := float64(2 * b.N * n * 6)
			rate, rawRate := lines/daemon.Seconds(), lines/raw.Seconds()
			b.ReportMetric(rate, "lines/s")
			b.ReportMetric(rawRate, "raw-lines/s")
			b.ReportMetric(rate/rawRate, "rate/raw-rate")
			// The tailer's share: until every line was published (the
			// projection's catch-up follows it).
			b.ReportMetric((lines/pub.Seconds())/rawRate, "pub-rate/raw-rate")
			// The work against the raw batch's: on two cores busy in
			// both, the rate ratio cannot pass the inverse of this.
			b.ReportMetric(daemonCPU/rawCPU, "cpu/raw-cpu")
			b.ReportMetric(float64(r.kvWrites), "kv-writes")
			b.ReportMetric(r.rssPeak/1e6, "rss-peak-MB")
			b.ReportMetric(r.rssBefore/1e6, "rss-ready-MB")
			r.idle.report(b, "")
			b.ReportMetric(float64(r.restartTracked.Milliseconds()), "restart-tracked-ms")
			r.restart.report(b, "restart-")
		})
	}
}

type scaleReport struct {
	published time.Duration // until every line was published (the tailer's share)
	cpu       float64       // the daemon's CPU seconds from its start until projected
	kvWrites  int64
	rssPeak   float64 // VmHWM once projected: the first read's peak
	rssBefore float64
	idle      idleFigures
	// The same, after the daemon is started again over its state.
	restartTracked time.Duration
	restart        idleFigures
}

// idleFigures is what an idle stretch measured.
type idleFigures struct {
	cpuPerMin, wakePerMin float64
	rss, rssFile          float64 // at its end; rssFile the file pages (RssFile) of rss
	// Over the stretch, sampled once a second: an idle daemon's resident
	// set goes up with its garbage and down when it is given back.
	rssMean, rssMax float64
	// The Go heap at its end (status): what the last collection found
	// live, and the pages held for objects (live, garbage, and the
	// unused room of their spans).
	heapLive, heapInUse float64
	trees               int // the projection's trees in memory
}

func (f idleFigures) report(b *testing.B, prefix string) {
	b.ReportMetric(f.cpuPerMin, prefix+"idle-cpu-s/min")
	b.ReportMetric(f.wakePerMin, prefix+"idle-wakeups/min")
	b.ReportMetric(f.rss/1e6, prefix+"rss-idle-MB")
	// Of it, the pages of files: the binary's own, which no session adds
	// to (the rest is anonymous memory).
	b.ReportMetric(f.rssFile/1e6, prefix+"rss-idle-file-MB")
	b.ReportMetric(f.rssMean/1e6, prefix+"rss-idle-mean-MB")
	b.ReportMetric(f.rssMax/1e6, prefix+"rss-idle-max-MB")
	b.ReportMetric(f.heapLive/1e6, prefix+"heap-live-idle-MB")
	b.ReportMetric(f.heapInUse/1e6, prefix+"heap-inuse-idle-MB")
	b.ReportMetric(float64(f.trees), prefix+"trees-idle")
}

// scaleSession is session i of the corpus, as text and as lines.
func scaleSession(i int) (sid, rel string, data []byte, lines []eventlog.Line) {
	sid = fmt.Sprintf("0199%04x-%04x-7000-8000-000000000000", i>>16, i&0xffff)
	rel = fmt.Sprintf("--home-u-p%d--/2026-11-30T00-00-00-000Z_%s.jsonl", i%50, sid)
	var sb strings.Builder
	add := func(raw, id, parent, typ string) {
		sb.WriteString(raw)
		sb.WriteByte('\n')
		lines = append(lines, eventlog.NewLine([]byte(raw), id, parent, typ, rel, int64(sb.Len())))
	}
	add(testenv.Header(sid), sid, "", "session")
	parent := ""
	for j := 1; j < 6; j++ {
		id := fmt.Sprintf("%08x", i*6+j)
		add(testenv.Entry(id, parent, strings.Repeat("lorem ipsum ", 20)), id, parent, "message")
		parent = id
	}
	return sid, rel, []byte(sb.String()), lines
}

// daemonSessions writes n sessions, starts the daemon and times it until
// every line is published and projected; with idle > 0 it then measures
// the idle daemon. live writes them once the daemon has started and
// settled instead, and times from the first write.
func daemonSessions(b *testing.B, bin string, n int, idle time.Duration, live bool) (time.Duration, scaleReport) {
	b.StopTimer()
	home := b.TempDir()
	sessions, state := filepath.Join(home, "sessions"), filepath.Join(home, "state")
	write := func() {
		for i := range n {
			_, rel, data, _ := scaleSession(i)
			path := filepath.Join(sessions, rel)
			if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
				b.Fatal(err)
			}
			if err := os.WriteFile(path, data, 0o600); err != nil {
				b.Fatal(err)
			}
		}
	}
	if err := os.MkdirAll(sessions, 0o700); err != nil {
		b.Fatal(err)
	}
	if !live {
		write()
	}
	env := append(os.Environ(), "PISYNC_SESSIONS_DIR="+sessions, "PISYNC_STATE_DIR="+state, "PISYNC_LOG_LEVEL=warn")
	syscall.Sync() // the files just written are not written back during the run
	// Polled every 100 ms from this process over the control socket, one
	// connection kept: a `pisyncd status` process per poll (how this
	// benchmark first asked) costs the two cores a start of the whole
	// binary each time, taken from the daemon it measures.
	ctl := controlClient(state)
	defer ctl.CloseIdleConnections()
	if live {
		d := startMemDaemon(b, bin, env)
		deadline := time.Now().Add(time.Minute)
		for daemonStatus(ctl).PID == 0 {
			select {
			case err := <-d.done:
				b.Fatalf("pisyncd exited before it answered: %v\n%s", err, d.stderr.String())
			case <-time.After(100 * time.Millisecond):
			}
			if time.Now().After(deadline) {
				b.Fatalf("pisyncd not up after a minute\n%s", d.stderr.String())
			}
		}
		// The start's own give-backs (the first read's, and 12 s after
		// it) are past: what follows is a burst in the daemon's life.
		time.Sleep(20 * time.Second)
		b.StartTimer()
		start := time.Now()
		write()
		return waitSessions(b, d, ctl, bin, env, n, idle, start)
	}
	b.StartTimer()
	start := time.Now()
	d := startMemDaemon(b, bin, env)
	return waitSessions(b, d, ctl, bin, env, n, idle, start)
}

// waitSessions waits until the daemon has published and projected the n
// sessions, then measures it idle (idle > 0).
func waitSessions(b *testing.B, d *memDaemon, ctl *http.Client, bin string, env []string, n int, idle time.Duration, start time.Time) (time.Duration, scaleReport) {
	want := int64(n * 6)
	var st Status
	deadline := time.Now().Add(20 * time.Minute)
	var published time.Duration
	for {
		st = daemonStatus(ctl)
		if published == 0 && st.Tailer.LinesPublished >= want {
			published = time.Since(start)
		}
		// Projected: every event applied, and every session's five views
		// (catalog, context index, leaf, heads, one page) handed to the
		// store: applied alone would not count the views still to write.
		if st.Tailer.LinesPublished >= want && st.Projection.Applied+st.Projection.Skipped >= want && st.Projection.Writes >= int64(5*n) {
			break
		}
		if time.Now().After(deadline) {
			b.Fatalf("%d of %d lines published, %d projected\n%s", st.Tailer.LinesPublished, want, st.Projection.Applied, d.stderr.String())
		}
		time.Sleep(100 * time.Millisecond)
	}
	took := time.Since(start)
	b.StopTimer()
	syscall.Sync() // files written during the run (live) are not written back while idle
	cpu, _ := procCPU(b, d.cmd.Process.Pid)
	r := scaleReport{kvWrites: st.Projection.Writes, published: published, cpu: cpu, rssPeak: float64(d.status(b, "VmHWM"))}
	if idle > 0 {
		time.Sleep(5 * time.Second) // let the first read's aftermath (flushes, GC) pass
		r.rssBefore = float64(d.rss(b))
		r.idle = idleStretch(b, d, ctl, idle)
		r.kvWrites = daemonStatus(ctl).Projection.Writes
	}
	d.stop(b)
	if idle > 0 {
		// The same daemon started again over what it holds, as after a
		// reboot: the idle stretch measured again once every file is
		// tracked (the case most daemons are in most of the time).
		d = startMemDaemon(b, bin, env)
		restart := time.Now()
		for daemonStatus(ctl).Tailer.FilesTracked < int64(n) {
			if time.Since(restart) > 10*time.Minute {
				b.Fatalf("restarted: not every file tracked\n%s", d.stderr.String())
			}
			time.Sleep(100 * time.Millisecond)
		}
		r.restartTracked = time.Since(restart)
		time.Sleep(5 * time.Second)
		r.restart = idleStretch(b, d, ctl, idle)
		d.stop(b)
	}
	b.StartTimer()
	return took, r
}

// idleStretch measures the daemon doing nothing for idle: its CPU seconds
// and context switches a minute, and its resident set after, and of that
// the pages of files, and its heap.
func idleStretch(b *testing.B, d *memDaemon, ctl *http.Client, idle time.Duration) idleFigures {
	cpu0, sw0 := procCPU(b, d.cmd.Process.Pid)
	t0 := time.Now()
	var f idleFigures
	var sum float64
	var n int
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for end := time.Now().Add(idle); time.Now().Before(end); {
		<-tick.C
		rss := float64(d.rss(b))
		sum, n, f.rssMax = sum+rss, n+1, max(f.rssMax, rss)
	}
	cpu1, sw1 := procCPU(b, d.cmd.Process.Pid)
	took := time.Since(t0).Minutes()
	f.cpuPerMin, f.wakePerMin = (cpu1-cpu0)/took, float64(sw1-sw0)/took
	f.rss, f.rssFile = float64(d.rss(b)), float64(d.status(b, "RssFile"))
	st := daemonStatus(ctl)
	f.heapLive, f.heapInUse = float64(st.Heap.LiveBytes), float64(st.Heap.InUseBytes) // zero from a daemon older than the figure
	f.trees = st.Projection.Trees
	if n > 0 {
		f.rssMean = sum / float64(n)
	}
	return f
}

// daemonStatus asks the daemon for its status (what `pisyncd status
// --json` prints); zero counters while it is not up yet.
func daemonStatus(ctl *http.Client) Status {
	var st Status
	resp, err := ctl.Get("http://pisyncd/status")
	if err != nil {
		return st // not up yet: polled again
	}
	defer resp.Body.Close()
	if resp.StatusCode == http.StatusOK {
		_ = json.NewDecoder(resp.Body).Decode(&st) // a partial answer: polled again
	}
	return st
}

// procCPU is a process's user+system CPU seconds and the context switches
// of all its threads (each a wake-up, voluntary or not).
func procCPU(b *testing.B, pid int) (float64, int64) {
	b.Helper()
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		b.Fatal(err)
	}
	f := strings.Fields(string(data[strings.LastIndexByte(string(data), ')')+2:]))
	ut, _ := strconv.ParseFloat(f[11], 64)
	stm, _ := strconv.ParseFloat(f[12], 64)
	var sw int64
	tasks, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/status", pid))
	for _, t := range tasks {
		data, err := os.ReadFile(t)
		if err != nil {
			continue // the thread ended
		}
		for _, l := range strings.Split(string(data), "\n") {
			if k, v, ok := strings.Cut(l, ":"); ok && strings.HasSuffix(k, "ctxt_switches") {
				n, _ := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
				sw += n
			}
		}
	}
	return (ut + stm) / 100, sw // USER_HZ is 100 on Linux
}

// rawSessions times publishing the same lines straight into a fresh
// embedded server: batches of whole sessions, 8 publishers. It returns
// the wall time and the CPU seconds this process spent meanwhile (the
// server's and the publishers': nothing else runs in it then).
func rawSessions(b *testing.B, n int) (time.Duration, float64) {
	b.StopTimer()
	ctx := context.Background()
	srv, err := embedded.Start(ctx, embedded.Config{StateDir: b.TempDir(), NodeID: "raw-node"})
	if err != nil {
		b.Fatal(err)
	}
	defer srv.Close()
	nc, err := srv.Connect()
	if err != nil {
		b.Fatal(err)
	}
	lg, err := eventlog.OpenLocal(ctx, nc, "raw-node")
	if err != nil {
		b.Fatal(err)
	}
	var batches [][]eventlog.Group
	var cur []eventlog.Group
	msgs := 0
	for i := range n {
		sid, _, _, lines := scaleSession(i)
		if msgs+len(lines) > eventlog.MaxBatch {
			batches, cur, msgs = append(batches, cur), nil, 0
		}
		cur = append(cur, eventlog.Group{SID: sid, Lines: lines})
		msgs += len(lines)
	}
	batches = append(batches, cur)
	syscall.Sync()
	work := make(chan []eventlog.Group)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var firstErr error
	b.StartTimer()
	cpu0 := testenv.ProcessCPU(b)
	start := time.Now()
	for range 8 {
		wg.Go(func() {
			for g := range work {
				if _, err := lg.PublishGroups(ctx, g); err != nil {
					mu.Lock()
					firstErr = err
					mu.Unlock()
				}
			}
		})
	}
	for _, g := range batches {
		work <- g
	}
	close(work)
	wg.Wait()
	took := time.Since(start)
	cpu := (testenv.ProcessCPU(b) - cpu0).Seconds()
	b.StopTimer()
	if firstErr != nil {
		b.Fatal(firstErr)
	}
	b.StartTimer()
	return took, cpu
}
