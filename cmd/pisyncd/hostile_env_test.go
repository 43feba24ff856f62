package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/pisyncd/pisyncd/config"
	"github.com/pisyncd/pisyncd/eventlog"
	"github.com/pisyncd/pisyncd/eventlog/embedded"
	"github.com/pisyncd/pisyncd/internal/testenv"
)

// The hostile-node suite (hostile_*_test.go). Every test replays one attack
// that succeeded against the daemon and asserts the outcome an honest user
// needs, whatever the fix looks like. The set-up is the deployed one: a
// secured hub (TLS, nkeys, teams), two honest workstations ann and bob of
// team t1, and eve, registered in t1 with her own nkey, who runs no
// pisyncd but a raw nats.go client on the hub's client port and publishes
// what she likes on her own subjects pi.up.eve.<sid>.

// hostileEnv is one such set-up, stopped when the test ends.
type hostileEnv struct {
	hub      *secureHub
	ann, bob *station
	eve      *testenv.Attacker
}

// startHostile starts the hub, ann and bob (adjust, if not nil, changes
// their configuration first) and connects eve. Before it returns, a
// session of ann's has reached bob: the honest path worked before any
// attack.
func startHostile(t *testing.T, adjust func(*config.Config)) *hostileEnv {
	t.Helper()
	return startHostileHub(t, nil, adjust)
}

// startHostileHub is startHostile with the hub's configuration changed
// first by hubAdjust, if not nil.
func startHostileHub(t *testing.T, hubAdjust func(*config.Hub), adjust func(*config.Config)) *hostileEnv {
	t.Helper()
	start := time.Now()
	h := startSecureHub(t)
	if hubAdjust != nil {
		hubAdjust(h.cfg)
	}
	seeds := map[string]string{}
	for _, n := range []string{"ann", "bob", "eve"} {
		seeds[n] = h.addNode(n, "t1")
	}
	h.run()
	ca := filepath.Join(h.certs, "ca.pem")
	run := func(name string) *station {
		cfg := stationConfig(t, name, "tls://localhost:"+portOnly(h.leaf))
		cfg.HubNkey, cfg.HubCA = seeds[name], ca
		if adjust != nil {
			adjust(cfg)
		}
		if err := cfg.Validate(); err != nil {
			t.Fatalf("%s: config: %v", name, err)
		}
		return runStation(t, cfg)
	}
	e := &hostileEnv{hub: h, ann: run("ann"), bob: run("bob")}
	e.eve = testenv.NewAttacker(t, "tls://localhost:"+portOnly(h.client), "eve", embedded.HubDomain,
		seedFileKey(t, seeds["eve"]), nats.RootCAs(ca), nats.CustomInboxPrefix(embedded.InboxPrefix("eve")))
	writeSession(t, e.ann, "0199f000-0000-7000-8000-00000000warm", 1)
	waitSecFile(t, e.bob, "0199f000-0000-7000-8000-00000000warm", 2, 30*time.Second)
	t.Logf("hub, ann, bob and eve up, first session replicated, in %v", time.Since(start).Round(time.Millisecond))
	return e
}

func portOnly(hostport string) string { return hostport[strings.LastIndex(hostport, ":")+1:] }

// secPath is where writeSession puts session sid on s (and where the
// replicator puts its copy: the cwd /sec is not mapped).
func secPath(s *station, sid string) string {
	return filepath.Join(s.cfg.SessionsDir, "--sec--", "2026-11-30T00-00-00-000Z_"+sid+".jsonl")
}

// secRel is secPath relative to the sessions dir, as Pi-File carries it.
func secRel(sid string) string { return "--sec--/2026-11-30T00-00-00-000Z_" + sid + ".jsonl" }

// readLines returns a file's lines (nil when it cannot be read).
func readLines(path string) []string {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil
	}
	return splitLines(string(b))
}

// waitSecFile waits until s's file of session sid has n lines and returns
// how long that took.
func waitSecFile(t *testing.T, s *station, sid string, n int, d time.Duration) time.Duration {
	t.Helper()
	start := time.Now()
	p := secPath(s, sid)
	waitUntil(t, d, func() (bool, string) {
		got := len(readLines(p))
		st, _ := s.status()
		return got == n, fmt.Sprintf("%s has %d of %d lines of %s; replicator %+v downloader %+v", s.name, got, n, sid, st.Replicator, st.Downloader)
	})
	return time.Since(start)
}

// send has from write a new session of n entries and returns how long to
// took to hold all of it (failing after d).
func (e *hostileEnv) send(t *testing.T, from, to *station, sid string, n int, d time.Duration) time.Duration {
	t.Helper()
	writeSession(t, from, sid, n)
	took := waitSecFile(t, to, sid, n+1, d)
	t.Logf("honest path: %s's new session %s reached %s in %v", from.name, sid, to.name, took.Round(time.Millisecond))
	return took
}

// rounds checks the honest path both ways, n times in a row: a new session
// of ann's reaches bob, then one of bob's reaches ann, each within d. One
// lucky crossing proves little where the daemon retries and each retry
// has its chance; n in a row, each way, is what a user relies on.
func (e *hostileEnv) rounds(t *testing.T, tag string, n int, d time.Duration) {
	t.Helper()
	for i := 0; i < n; i++ {
		e.send(t, e.ann, e.bob, fmt.Sprintf("0199a000-%s-7000-8000-ann%09d", tag, i), 2, d)
		e.send(t, e.bob, e.ann, fmt.Sprintf("0199b000-%s-7000-8000-bob%09d", tag, i), 2, d)
	}
}

// idle waits until neither ann's nor bob's file of session sid has been
// written for twice the stations' idle time: remote lines are then
// appended to them at once, not deferred as while pi writes.
func (e *hostileEnv) idle(t *testing.T, sid string) {
	t.Helper()
	for _, s := range []*station{e.ann, e.bob} {
		p := secPath(s, sid)
		waitUntil(t, 10*time.Second, func() (bool, string) {
			st, err := os.Stat(p)
			return err == nil && time.Since(st.ModTime()) > 2*s.cfg.IdleAfter, fmt.Sprintf("%s's file %s: %v, written %v ago", s.name, p, err, time.Since(st.ModTime()))
		})
	}
}

// settle returns once each honest station has applied everything published
// before it was called: a sentinel session written on ann reached bob, and
// one written on bob reached ann. PI_ALL is in hub order, so what eve
// published before has been read by both replicators, and written where
// the file was idle (see idle). A sentinel may land a moment before
// another file of the same round is written, and what a replicator wrote
// is read by its tailer on the next walk: settle ends after two more
// walks of each tailer.
func (e *hostileEnv) settle(t *testing.T, tag string) {
	t.Helper()
	for _, p := range [][2]*station{{e.ann, e.bob}, {e.bob, e.ann}} {
		sid := "0199f000-0000-7000-8000-sentinel" + tag + p[0].name
		rel := writeSentinel(t, p[0], sid)
		waitUntil(t, 20*time.Second, func() (bool, string) {
			n := len(p[1].sessionFiles()[rel])
			return n == 2, fmt.Sprintf("%s's sentinel %s: %s holds %d of 2 lines", p[0].name, sid, p[1].name, n)
		})
	}
	e.quiet(t, 2)
}

// quiet waits until both stations' tailers have walked the sessions dirs
// n more times and nothing waits in their replicators: what the replicators
// wrote has been read (and, were it to be, published) by the tailers.
func (e *hostileEnv) quiet(t *testing.T, n int64) {
	t.Helper()
	r0 := map[*station]int64{e.ann: e.ann.d.tailer.Stats().Rescans, e.bob: e.bob.d.tailer.Stats().Rescans}
	waitUntil(t, 20*time.Second, func() (bool, string) {
		for s, r := range r0 {
			if got := s.d.tailer.Stats().Rescans; got < r+n {
				return false, fmt.Sprintf("%s: %d rescans, want %d", s.name, got, r+n)
			}
		}
		return true, ""
	})
}

// localEvents returns every event of s's own subjects in its PI_LOCAL,
// read over the station's connection.
func localEvents(t *testing.T, s *station) []*eventlog.Event {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	js := s.d.log.JetStream()
	info, err := s.d.log.Stream().Info(ctx)
	if err != nil {
		t.Fatalf("%s: PI_LOCAL: %v", s.name, err)
	}
	if info.State.LastSeq == 0 {
		return nil
	}
	var out []*eventlog.Event
	err = eventlog.ReadFiltered(ctx, js, eventlog.LocalStream, eventlog.LocalPrefix+"."+s.name+".>", info.State.LastSeq, false, func(ev *eventlog.Event) error {
		out = append(out, ev)
		return nil
	})
	if err != nil {
		t.Fatalf("%s: read PI_LOCAL: %v", s.name, err)
	}
	return out
}

// entry is what a check of a session file needs of a line.
type entry struct {
	Type     string  `json:"type"`
	ID       *string `json:"id"`
	ParentID *string `json:"parentId"`
}

// treeFaults lists what makes a session file unsafe for pi: an entry id
// held by two lines (the later one silently replaces the first) and a
// parentId cycle (pi has no guard: it spins until its heap is gone).
func treeFaults(lines []string) []string {
	var faults []string
	parent := map[string]string{}
	for i, l := range lines {
		var e entry
		if json.Unmarshal([]byte(l), &e) != nil || e.Type == "session" || e.ID == nil {
			continue
		}
		if _, dup := parent[*e.ID]; dup {
			faults = append(faults, fmt.Sprintf("line %d: id %q held twice", i+1, *e.ID))
		}
		parent[*e.ID] = ""
		if e.ParentID != nil {
			parent[*e.ID] = *e.ParentID
		}
	}
	for id := range parent {
		cur := id
		for steps := 0; cur != ""; steps++ {
			if steps > len(parent) {
				faults = append(faults, fmt.Sprintf("parentId cycle through %q", id))
				break
			}
			cur = parent[cur]
		}
	}
	return faults
}

// piContext is what real pi builds from a file: the context's entry ids
// and messages. Its error says when pi failed or did not finish in time.
func piContext(t *testing.T, file string) (ids, msgs any, err error) {
	t.Helper()
	out, err := testenv.RunOracle(t, 20*time.Second, "context", file)
	if err != nil {
		// pi's stderr after a crash is a long native stack: its head
		// says what happened.
		msg := strings.Join(strings.Fields(err.Error()), " ")
		if len(msg) > 400 {
			msg = msg[:400] + " …"
		}
		return nil, nil, errors.New(msg)
	}
	var v map[string]any
	if err := json.Unmarshal(out, &v); err != nil {
		return nil, nil, fmt.Errorf("pi-oracle context %s: %v: %s", file, err, out)
	}
	if e, ok := v["error"]; ok {
		return nil, nil, fmt.Errorf("pi-oracle context %s: %v", file, e)
	}
	return v["contextEntryIds"], v["messages"], nil
}

// snapshot copies a file into a fresh temp dir (to ask pi about it later,
// as it was).
func snapshot(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(t.TempDir(), filepath.Base(path))
	testenv.WriteFile(t, p, b)
	return p
}

// linesWith lists the lines of a file that contain marker.
func linesWith(lines []string, marker string) []string {
	var out []string
	for _, l := range lines {
		if strings.Contains(l, marker) {
			out = append(out, l)
		}
	}
	return out
}

// eventsWith lists the events whose payload contains marker.
func eventsWith(evs []*eventlog.Event, marker string) []string {
	var out []string
	for _, ev := range evs {
		if bytes.Contains(ev.Raw, []byte(marker)) {
			out = append(out, fmt.Sprintf("%s seq %d: %q", ev.Subject, ev.Seq, ev.Raw))
		}
	}
	return out
}
