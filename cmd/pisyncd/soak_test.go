//go:build soak && linux

package main

// The soak: rounds of a real daemon process under pi-like writers, with
// kill -9 at random moments, a full disk under the state dir (alone and
// with a kill in the middle), and bad input (garbage files, FIFOs, lines
// over the limit and chunked ones, a session file deleted and put back),
// checking after every round that each session's stream holds exactly its
// file's publishable lines, in order. It runs for -soak.duration and prints
// a JSON summary (also written to -soak.json). See docs/SOAK.md.
//
//	go test -tags soak -run TestSoak -timeout 0 -v ./cmd/pisyncd -soak.duration 30m -soak.json /tmp/soak.json

import (
	"encoding/json"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"
)

var (
	soakDuration = flag.Duration("soak.duration", 3*time.Minute, "how long the soak runs (rounds end before it)")
	soakJSON     = flag.String("soak.json", "", "also write the JSON summary to this file")
	soakSeed     = flag.Uint64("soak.seed", 0, "random seed (0: from the clock)")
)

// trialStats is what the summary says of one kind of trial.
type trialStats struct {
	Count int `json:"count"`
	// MaxRecoveryMs is the longest time from the end of a fault (the
	// daemon restarted, the disk freed) until every line written before
	// it was stored.
	MaxRecoveryMs int64 `json:"maxRecoveryMs,omitempty"`
	// Stuck counts faults after which the lines written before them were
	// not all stored within a minute.
	Stuck int `json:"stuck,omitempty"`
	// Disk full: how soon status reported it, and how often it did not
	// within two seconds or did not answer within two seconds.
	MaxDetectMs    int64 `json:"maxDetectMs,omitempty"`
	NotReported    int   `json:"notReported,omitempty"`
	StatusTimeouts int   `json:"statusTimeouts,omitempty"`
	// Crash while full: starts refused by a daemon on a full disk.
	RefusedStarts int `json:"refusedStarts,omitempty"`
	// FIFO: times the daemon was found holding a FIFO open (an open(2)
	// blocked on it) when the trial ended.
	BlockedReaders int `json:"blockedReaders,omitempty"`
}

type soakSummary struct {
	Seed       uint64                 `json:"seed"`
	Duration   string                 `json:"duration"`
	Rounds     int                    `json:"rounds"`
	Sessions   int                    `json:"sessions"`
	Lines      int                    `json:"lines"`      // publishable lines checked at the ends of rounds
	Lost       int                    `json:"lost"`       // of them, not stored
	Duplicated int                    `json:"duplicated"` // events stored twice
	OutOfOrder int                    `json:"outOfOrder"` // sessions whose stream order differs from the file
	Extra      int                    `json:"extra"`      // events that are no line of the file
	Subjects   int                    `json:"unexpectedSubjects"`
	Restarts   int                    `json:"daemonStarts"`
	StopHangs  int                    `json:"stopHangs"` // SIGTERM not obeyed within 30 s
	MaxRecMs   int64                  `json:"maxRecoveryMs"`
	Trials     map[string]*trialStats `json:"trials"`
	Failures   []string               `json:"failures,omitempty"`
}

func (s *soakSummary) trial(name string) *trialStats {
	if s.Trials[name] == nil {
		s.Trials[name] = &trialStats{}
	}
	return s.Trials[name]
}

func (s *soakSummary) recovered(name string, d time.Duration, ok bool) {
	ts := s.trial(name)
	if !ok {
		ts.Stuck++
		return
	}
	ms := d.Milliseconds()
	ts.MaxRecoveryMs = max(ts.MaxRecoveryMs, ms)
	s.MaxRecMs = max(s.MaxRecMs, ms)
}

func (s *soakSummary) fail(format string, args ...any) {
	if len(s.Failures) < 100 {
		s.Failures = append(s.Failures, fmt.Sprintf(format, args...))
	}
}

// TestSoak runs soak rounds until -soak.duration is up.
func TestSoak(t *testing.T) {
	seed := *soakSeed
	if seed == 0 {
		seed = uint64(time.Now().UnixNano())
	}
	rng := rand.New(rand.NewPCG(seed, 7))
	start := time.Now()
	deadline := start.Add(*soakDuration)
	sum := &soakSummary{Seed: seed, Trials: map[string]*trialStats{}}
	t.Logf("soak: seed %d, until %s", seed, deadline.Format(time.TimeOnly))
	for round := 1; time.Until(deadline) > 20*time.Second; round++ {
		r := newSoakRound(t, round, rng, sum, deadline)
		r.run()
		sum.Rounds++
		t.Logf("round %d done after %v: %d lines so far, lost %d, duplicated %d, failures %d",
			round, time.Since(start).Round(time.Second), sum.Lines, sum.Lost, sum.Duplicated, len(sum.Failures))
	}
	sum.Duration = time.Since(start).Round(time.Second).String()
	out, _ := json.MarshalIndent(sum, "", "  ")
	fmt.Println(string(out))
	t.Logf("summary:\n%s", out)
	if *soakJSON != "" {
		if err := os.WriteFile(*soakJSON, append(out, '\n'), 0o600); err != nil {
			t.Error(err)
		}
	}
	if sum.Lost > 0 || sum.Duplicated > 0 || sum.OutOfOrder > 0 || sum.Extra > 0 || sum.Subjects > 0 {
		t.Errorf("exactly-once broken: lost %d, duplicated %d, out of order %d, extra %d, unexpected subjects %d",
			sum.Lost, sum.Duplicated, sum.OutOfOrder, sum.Extra, sum.Subjects)
	}
	if len(sum.Failures) > 0 {
		t.Errorf("%d failures:\n%s", len(sum.Failures), strings.Join(sum.Failures, "\n"))
	}
}

// lockedSessions wraps a sessionWriter so that trials write into its files
// between its steps, never between the two halves of a split line.
type lockedSessions struct {
	mu sync.Mutex
	w  *sessionWriter
}

func (l *lockedSessions) do(f func(w *sessionWriter) error) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return f(l.w)
}

// sortedKeys is for stable reports.
func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
