package session

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// The differential test: generated hostile session files (hostileFile) go
// through pisyncd's rules and real pi's (pi-eval), and every report
// section must agree canonically, errors included. The normal run checks
// 60 files (about 30 s on a loaded 2-core machine); the long one is
//
//	go test ./session/ -run TestDifferential -timeout 0 -v -args -diff.n 10000 -diff.seed 7
//
// A disagreement is minimised and written under -diff.out (default: the
// test's temp dir); copy it to testdata/hostile/ with
// `go test ./session/ -run TestHostileCases -args -hostile.update`.
var (
	diffN       = flag.Int("diff.n", 60, "differential test: number of generated files")
	diffSeed    = flag.Uint64("diff.seed", 1, "differential test: generator seed")
	diffFrom    = flag.Int("diff.from", 0, "differential test: first file number")
	diffProcs   = flag.Int("diff.procs", 2, "differential test: pi-eval processes")
	diffTimeout = flag.Int("diff.timeout", 3000, "differential test: ms before a pi section counts as non-terminating")
	diffHeap    = flag.Int("diff.heap", 96, "differential test: heap limit (MB) of pi's process (a small one ends a parentId cycle fast; a file pi-eval runs out of heap on is checked again with 384 MB)")
	diffOut     = flag.String("diff.out", "", "differential test: folder for minimised disagreements")
	diffMin     = flag.Int("diff.minimize", 3, "differential test: how many disagreements to minimise")
)

// diffRules are the rule sets compared, with auto checked against the
// set it picks.
var diffRules = []RuleSet{RulesSeed, RulesPi16, RulesAuto}

// diffResult is the outcome of one generated file.
type diffResult struct {
	n       int
	raw     []byte
	why     map[RuleSet]string // disagreement per rule set
	nonTerm int                // pi sections that never returned
	err     error
}

// piTime and goTime add up the time spent in each side (nanoseconds).
var piTime, goTime atomic.Int64

// checkFile compares pisyncd and pi on raw (written at path) under every
// rule set.
func checkFile(p *piEval, path string, raw []byte) (map[RuleSet]string, int, error) {
	answers := map[RuleSet]*piAnswer{}
	nonTerm := 0
	t0 := time.Now()
	for _, r := range []RuleSet{RulesSeed, RulesPi16} {
		a, err := p.eval(path, piBundle[r])
		if err != nil {
			return nil, 0, err
		}
		answers[r] = a
		if a.Load == "nonTerminating" {
			nonTerm++
		}
		for _, s := range a.Sections {
			if s.NonTerminating {
				nonTerm++
			}
		}
	}
	piTime.Add(int64(time.Since(t0)))
	t0 = time.Now()
	defer func() { goTime.Add(int64(time.Since(t0))) }()
	why := map[RuleSet]string{}
	for _, r := range diffRules {
		g := reportOf(raw, r)
		want := answers[g.Rules]
		if g.Rules == RulesAuto {
			want = answers[RulesSeed] // not loaded: the load verdict is the same in both
		}
		if d := disagreement(g, want); d != "" {
			why[r] = d
		}
	}
	return why, nonTerm, nil
}

func TestDifferential(t *testing.T) {
	if testing.Short() {
		t.Skip("runs node")
	}
	procs := max(1, *diffProcs)
	evals := make([]*piEval, procs)
	slow := make([]*piEval, procs) // for second opinions: 384 MB, 10 s
	for k := range evals {
		evals[k] = startPiEval(t, *diffTimeout, *diffHeap)
		slow[k] = startPiEval(t, 10000, 384)
	}
	dir := t.TempDir()
	start := time.Now()
	jobs := make(chan int)
	results := make(chan diffResult)
	var wg sync.WaitGroup
	for k := range evals {
		wg.Add(1)
		go func(p, slow *piEval) {
			defer wg.Done()
			for n := range jobs {
				raw := hostileFile(*diffSeed, n)
				path := filepath.Join(dir, fmt.Sprintf("case-%d.jsonl", n))
				res := diffResult{n: n, raw: raw}
				if res.err = os.WriteFile(path, raw, 0o644); res.err == nil {
					res.why, res.nonTerm, res.err = checkFile(p, path, raw)
				}
				if res.err == nil && len(res.why) > 0 && res.nonTerm > 0 {
					// pi ran out of the small heap or time: ask again with plenty
					res.why, res.nonTerm, res.err = checkFile(slow, path, raw)
				}
				os.Remove(path)
				results <- res
			}
		}(evals[k], slow[k])
	}
	go func() {
		for n := *diffFrom; n < *diffFrom+*diffN; n++ {
			jobs <- n
		}
		close(jobs)
		wg.Wait()
		close(results)
	}()
	var bad []diffResult
	files, nonTerm, filesNonTerm := 0, 0, 0
	for res := range results {
		if res.err != nil {
			t.Errorf("file %d: %v", res.n, res.err)
			continue
		}
		files++
		nonTerm += res.nonTerm
		if res.nonTerm > 0 {
			filesNonTerm++
			if testing.Verbose() && filesNonTerm <= 20 {
				t.Logf("file %d: %d pi sections never returned", res.n, res.nonTerm)
			}
		}
		if len(res.why) > 0 {
			bad = append(bad, res)
			for _, r := range diffRules {
				if w := res.why[r]; w != "" {
					t.Logf("file %d disagrees (%s): %s", res.n, r, clip(strings.SplitN(w, "\n", 2)[0]))
					break
				}
			}
			if *diffOut != "" {
				orig := filepath.Join(*diffOut, fmt.Sprintf("seed%d-%d.orig.jsonl", *diffSeed, res.n))
				if err := os.MkdirAll(*diffOut, 0o755); err != nil {
					t.Error(err)
				} else if err := os.WriteFile(orig, res.raw, 0o644); err != nil {
					t.Error(err)
				}
			}
		}
		if files%1000 == 0 {
			t.Logf("%d files, %d disagreements, %s", files, len(bad), time.Since(start).Round(time.Second))
		}
	}
	t.Logf("seed %d, files %d..%d: %d files, %d disagreeing, %d files with %d pi sections that never returned (pisyncd reported an error for each), %s",
		*diffSeed, *diffFrom, *diffFrom+*diffN-1, files, len(bad), filesNonTerm, nonTerm, time.Since(start).Round(time.Millisecond))
	t.Logf("time in pi-eval %s, in pisyncd %s (summed over workers)", time.Duration(piTime.Load()).Round(time.Millisecond), time.Duration(goTime.Load()).Round(time.Millisecond))
	sort.Slice(bad, func(i, j int) bool { return bad[i].n < bad[j].n })
	out := *diffOut
	if out == "" {
		out = t.TempDir()
	}
	for k, res := range bad {
		if k < 20 {
			var lines []string
			for _, r := range diffRules {
				if w := res.why[r]; w != "" {
					lines = append(lines, fmt.Sprintf("  %s: %s", r, w))
				}
			}
			t.Errorf("file %d (-diff.seed %d -diff.from %d -diff.n 1) disagrees:\n%s", res.n, *diffSeed, res.n, strings.Join(lines, "\n"))
		}
		if k < *diffMin {
			minimizeCase(t, evals[0], res, out)
		}
	}
}

// minimizeCase shrinks a disagreeing file and writes it to out as
// seedS-N.jsonl.
func minimizeCase(t *testing.T, p *piEval, res diffResult, out string) {
	var rule RuleSet
	for _, r := range diffRules {
		if res.why[r] != "" {
			rule = r
			break
		}
	}
	probe := filepath.Join(t.TempDir(), "probe.jsonl")
	disagrees := func(raw []byte) bool {
		if os.WriteFile(probe, raw, 0o644) != nil {
			return false
		}
		why, _, err := checkFile(p, probe, raw)
		return err == nil && why[rule] != ""
	}
	small := minimize(res.raw, disagrees, 400)
	name := filepath.Join(out, fmt.Sprintf("seed%d-%d.jsonl", *diffSeed, res.n))
	if err := os.WriteFile(name, small, 0o644); err != nil {
		t.Errorf("write %s: %v", name, err)
		return
	}
	t.Logf("file %d minimised (%d → %d bytes, %s): %s", res.n, len(res.raw), len(small), rule, name)
}
