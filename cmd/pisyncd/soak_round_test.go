//go:build soak && linux

package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/pisyncd/pisyncd/internal/testenv"
	"github.com/pisyncd/pisyncd/session"
)

const (
	soakMaxLine   = 1 << 20  // PISYNC_MAX_LINE of the soak's daemons
	soakStateDisk = 64 << 20 // the tmpfs under the state dir
	// catchUpTimeout bounds the wait for the lines written before a fault.
	catchUpTimeout = time.Minute
)

// soakRound is one daemon's life: a fresh home, a tmpfs under its state
// dir, writers, a shuffled list of trials, and the check at the end.
type soakRound struct {
	t        *testing.T
	n        int
	rng      *rand.Rand
	sum      *soakSummary
	deadline time.Time

	home, sessions, state string
	env                   []string
	p                     *daemonProc
	ws                    *lockedSessions
	files                 []string // session files checked at the end
	extra                 int      // sessions begun by trials
}

func newSoakRound(t *testing.T, n int, rng *rand.Rand, sum *soakSummary, deadline time.Time) *soakRound {
	return &soakRound{t: t, n: n, rng: rng, sum: sum, deadline: deadline}
}

func (r *soakRound) run() {
	t := r.t
	home, err := os.MkdirTemp("", "pisyncd-soak-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(home)
	r.home, r.sessions, r.state = home, filepath.Join(home, "sessions"), filepath.Join(home, "state")
	if err := os.MkdirAll(r.state, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := unix.Mount("tmpfs", r.state, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, fmt.Sprintf("size=%d,mode=0700", soakStateDisk)); err != nil {
		t.Skipf("soak: cannot mount a tmpfs on the state dir (%v): the disk-full trials need root or CAP_SYS_ADMIN", err)
	}
	defer func() {
		if err := testenv.Unmount(r.state); err != nil {
			r.sum.fail("round %d: %v", r.n, err)
		}
	}()
	r.env = []string{
		"PISYNC_SESSIONS_DIR=" + r.sessions, "PISYNC_STATE_DIR=" + r.state, "PISYNC_NODE_ID=soak",
		"PISYNC_RESCAN_INTERVAL=200ms", "PISYNC_LOG_LEVEL=warn", fmt.Sprintf("PISYNC_MAX_LINE=%d", soakMaxLine),
		"PISYNC_WORKERS=4",
	}
	r.ws = &lockedSessions{w: newSessionWriter(t, r.sessions, 4, r.rng.Uint64())}
	r.files = append(r.files, r.ws.w.files...)
	r.start()
	stopWriter := r.writeLoop(25 * time.Millisecond)

	trials := []string{"crash", "crash", "crash", "diskFull", "crashWhileFull", "garbage", "fifo", "hugeLine", "recreate"}
	r.rng.Shuffle(len(trials), func(i, j int) { trials[i], trials[j] = trials[j], trials[i] })
	for _, name := range trials {
		if time.Until(r.deadline) < 15*time.Second {
			break
		}
		r.pause(200*time.Millisecond, 1500*time.Millisecond)
		r.sum.trial(name).Count++
		switch name {
		case "crash":
			r.crash()
		case "diskFull":
			r.diskFull()
		case "crashWhileFull":
			r.crashWhileFull()
		case "garbage":
			r.garbage()
		case "fifo":
			r.fifo()
		case "hugeLine":
			r.hugeLine()
		case "recreate":
			r.recreate()
		}
	}
	if err := stopWriter(); err != nil {
		r.sum.fail("round %d: writer: %v", r.n, err)
	}
	r.check()
	r.stop()
}

// start runs the daemon; a daemon refused on a full disk exits by itself.
func (r *soakRound) start() {
	r.p = startDaemonProcArgs(r.t, r.env, nil, "run")
	r.sum.Restarts++
}

// stop ends the daemon with SIGTERM, or SIGKILL when it does not obey.
func (r *soakRound) stop() {
	if r.p == nil {
		return
	}
	r.p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-r.p.done:
	case <-time.After(30 * time.Second):
		r.sum.StopHangs++
		r.sum.fail("round %d: the daemon did not stop within 30 s of SIGTERM\n%s", r.n, tail(stderrText(r.p)))
		r.p.cmd.Process.Kill()
		<-r.p.done
	}
	r.p = nil
}

func (r *soakRound) kill() {
	r.p.cmd.Process.Kill()
	<-r.p.done
	r.p = nil
}

// exited reports whether the daemon ended by itself.
func (r *soakRound) exited() bool {
	select {
	case err := <-r.p.done:
		r.p.done <- err // keep it for stop
		return true
	default:
		return false
	}
}

func (r *soakRound) pause(lo, hi time.Duration) {
	time.Sleep(lo + time.Duration(r.rng.Int64N(int64(hi-lo)))) // the soak's pace, not synchronisation
}

func (r *soakRound) writeLoop(tick time.Duration) (stop func() error) {
	done := make(chan struct{})
	errc := make(chan error, 1)
	go func() {
		tk := time.NewTicker(tick)
		defer tk.Stop()
		for {
			select {
			case <-done:
				errc <- nil
				return
			case <-tk.C:
				if err := r.ws.do(func(w *sessionWriter) error { return w.step() }); err != nil {
					errc <- err
					return
				}
			}
		}
	}()
	return func() error {
		close(done)
		return <-errc
	}
}

// publishable returns a session file's session id and the lines the
// daemon publishes: its complete lines that are headers or entries and not
// over the limit.
func publishable(path string) (sid string, lines []string, err error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return "", nil, err
	}
	if i := bytes.LastIndexByte(data, '\n'); i >= 0 {
		data = data[:i]
	} else {
		data = nil
	}
	for _, raw := range bytes.Split(data, []byte("\n")) {
		if len(raw) > soakMaxLine {
			continue
		}
		l := session.ParseLine(raw)
		if l.Kind == session.Header || l.Kind == session.Entry {
			if sid == "" && l.Kind == session.Header {
				sid = l.ID
			}
			lines = append(lines, string(raw))
		}
	}
	return sid, lines, nil
}

// storedLines returns a session's stored lines in stream order, control
// events (tombstones, restores) left out.
func storedLines(stateDir, sid string) ([]string, error) {
	evs, err := controlEvents(stateDir, sid)
	if err != nil {
		return nil, err
	}
	out := evs[:0]
	for _, e := range evs {
		var m map[string]json.RawMessage
		if json.Unmarshal([]byte(e), &m) == nil {
			if _, op := m["op"]; op {
				if _, typ := m["type"]; !typ {
					continue
				}
			}
		}
		out = append(out, e)
	}
	return out, nil
}

// snapshot is every file's publishable lines now.
func (r *soakRound) snapshot() map[string][]string {
	snap := map[string][]string{}
	r.ws.do(func(*sessionWriter) error {
		for _, f := range r.files {
			if sid, lines, err := publishable(f); err == nil && sid != "" {
				snap[sid] = lines
			}
		}
		return nil
	})
	return snap
}

// measure waits until every line of snap is stored (as a prefix of its
// session's stream) and records how long that took.
func (r *soakRound) measure(trial string, snap map[string][]string) {
	start := time.Now()
	for {
		if ok, _ := r.holds(snap); ok {
			r.sum.recovered(trial, time.Since(start), true)
			return
		}
		if time.Since(start) > catchUpTimeout {
			_, why := r.holds(snap)
			r.sum.recovered(trial, 0, false)
			r.sum.fail("round %d: %s: lines written before the fault not stored within %v: %s\n%s", r.n, trial, catchUpTimeout, why, tail(stderrText(r.p)))
			return
		}
		if r.exited() {
			r.sum.fail("round %d: %s: the daemon exited by itself\n%s", r.n, trial, tail(stderrText(r.p)))
			r.stop()
			r.start()
		}
		time.Sleep(200 * time.Millisecond) // polling the daemon, with a deadline
	}
}

func (r *soakRound) holds(snap map[string][]string) (bool, string) {
	for _, sid := range sortedKeys(snap) {
		want := snap[sid]
		got, err := storedLines(r.state, sid)
		if err != nil {
			return false, fmt.Sprintf("session %s: %v", sid, err)
		}
		if len(got) < len(want) {
			return false, fmt.Sprintf("session %s: %d of %d lines", sid, len(got), len(want))
		}
		for i := range want {
			if got[i] != want[i] {
				return false, fmt.Sprintf("session %s: event %d is not line %d", sid, i, i)
			}
		}
	}
	return true, ""
}

// check waits until every session's stream is its file's publishable
// lines, then counts what is lost, twice, extra or out of order.
func (r *soakRound) check() {
	deadline := time.Now().Add(2 * time.Minute)
	var final map[string][]string
	for {
		final = r.snapshot()
		ok, _ := r.exact(final)
		if ok || time.Now().After(deadline) {
			break
		}
		time.Sleep(250 * time.Millisecond) // polling the daemon, with a deadline
	}
	r.sum.Sessions += len(final)
	for _, sid := range sortedKeys(final) {
		want := final[sid]
		r.sum.Lines += len(want)
		got, err := storedLines(r.state, sid)
		if err != nil {
			r.sum.fail("round %d: session %s: %v", r.n, sid, err)
			r.sum.Lost += len(want)
			continue
		}
		wantN := map[string]int{}
		for _, l := range want {
			wantN[l]++
		}
		gotN := map[string]int{}
		for _, l := range got {
			gotN[l]++
		}
		lost, dup, extra := 0, 0, 0
		for l, n := range wantN {
			if gotN[l] < n {
				lost += n - gotN[l]
			}
		}
		for l, n := range gotN {
			switch w := wantN[l]; {
			case w == 0:
				extra += n
			case n > w:
				dup += n - w
			}
		}
		r.sum.Lost += lost
		r.sum.Duplicated += dup
		r.sum.Extra += extra
		if lost+dup+extra == 0 && strings.Join(got, "\n") != strings.Join(want, "\n") {
			r.sum.OutOfOrder++
		}
		if lost+dup+extra > 0 {
			r.sum.fail("round %d: session %s: %d lines in the file, %d stored: %d lost, %d twice, %d extra", r.n, sid, len(want), len(got), lost, dup, extra)
		}
	}
	if st, err := statusWithin(r.state, 5*time.Second); err != nil {
		r.sum.fail("round %d: status: %v", r.n, err)
	} else if int(st.Stream.Subjects) != len(final) {
		r.sum.Subjects += int(st.Stream.Subjects) - len(final)
		r.sum.fail("round %d: %d subjects in PI_LOCAL for %d sessions", r.n, st.Stream.Subjects, len(final))
	}
}

func (r *soakRound) exact(snap map[string][]string) (bool, string) {
	for _, sid := range sortedKeys(snap) {
		got, err := storedLines(r.state, sid)
		if err != nil {
			return false, err.Error()
		}
		if strings.Join(got, "\n") != strings.Join(snap[sid], "\n") {
			return false, fmt.Sprintf("session %s: %d stored, %d in the file", sid, len(got), len(snap[sid]))
		}
	}
	return true, ""
}

// tail is the end of a daemon's stderr, for failure reports.
func tail(s string) string {
	const n = 2000
	if len(s) > n {
		s = "…" + s[len(s)-n:]
	}
	return s
}
