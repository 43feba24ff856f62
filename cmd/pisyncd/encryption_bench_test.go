package main

import (
	"context"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/pisyncd/pisyncd/internal/testenv"
	"github.com/pisyncd/pisyncd/keyring"
)

// BenchmarkEncryption measures, in one run, what end-to-end encryption
// costs: replication latency A → B (p50, p99 over PISYNC_BENCH_SAMPLES
// lines a side, default 300) and catch-up rate (B offline while A writes
// PISYNC_BENCH_CATCHUP lines, default 20000, in 10 sessions; then the
// time until B's files hold them all), plain and sealed, with the sealed
// / plain ratios. Each mode gets its own hub and workstations. The two
// sides are interleaved so that both see the same load on a shared
// machine: the latency samples go plain, sealed, sealed, plain, … between
// two pairs running at once, and the catch-ups run plain, sealed, sealed,
// plain, PISYNC_BENCH_ROUNDS times (default 1), each side's rate being
// its lines over its time. PISYNC_BENCH_AA=1 runs the control: both sides
// plain, the ratios then being the machine's noise alone.
func BenchmarkEncryption(b *testing.B) {
	samples, n := testenv.EnvInt(b, "PISYNC_BENCH_SAMPLES", 300, 1, math.MaxInt), testenv.EnvInt(b, "PISYNC_BENCH_CATCHUP", 20000, 1, math.MaxInt)
	rounds := testenv.EnvInt(b, "PISYNC_BENCH_ROUNDS", 1, 1, math.MaxInt)
	for iter := 0; iter < b.N; iter++ {
		rings := map[string]*keyring.Ring{"plain": nil, "sealed": keyring.New(time.Now())}
		if os.Getenv("PISYNC_BENCH_AA") != "" {
			// The control: both sides plain, so the "sealed/plain"
			// ratios are the run-to-run noise of the machine alone.
			rings["sealed"] = nil
		}
		lat := encLatency(b, rings, samples)
		var took [2]time.Duration
		for r := 0; r < rounds; r++ {
			for _, side := range []int{0, 1, 1, 0} {
				took[side] += encCatchUp(b, rings[[]string{"plain", "sealed"}[side]], n)
			}
		}
		rate := [2]float64{}
		for side := range rate {
			rate[side] = float64(2*rounds*n) / took[side].Seconds()
		}
		for side, mode := range []string{"plain", "sealed"} {
			b.ReportMetric(lat[mode][0], mode+"-p50-ms")
			b.ReportMetric(lat[mode][1], mode+"-p99-ms")
			b.ReportMetric(rate[side], mode+"-catchup-lines/s")
		}
		b.ReportMetric(lat["sealed"][0]/lat["plain"][0], "p50-sealed/plain")
		b.ReportMetric(lat["sealed"][1]/lat["plain"][1], "p99-sealed/plain")
		b.ReportMetric(rate[1]/rate[0], "catchup-sealed/plain")
	}
}

// encStation is benchStationWith with PISYNC_ENCRYPT=on and ring as the team
// key, or plain (ring nil, PISYNC_ENCRYPT=off).
func encStation(b *testing.B, name, hubURL string, ring *keyring.Ring) *benchNode {
	home := b.TempDir()
	key := filepath.Join(home, "team-key.json")
	enc := "off"
	if ring != nil {
		enc = "on"
		if err := keyring.Save(key, ring); err != nil {
			b.Fatal(err)
		}
	}
	cfg := benchStationConfig(home, name, hubURL)
	cfg.Encrypt, cfg.KeyFile = enc, key
	n := &benchNode{tb: b, cfg: cfg}
	n.start()
	b.Cleanup(n.stop)
	return n
}

// encLatency is the p50 and p99 latency in ms of samples lines A → B's
// file for each mode of rings (its team key, nil for plain), each on its
// own hub and pair of workstations, all running at once: the lines go to
// the modes in turn, in the order a b b a, one line at a time.
func encLatency(b *testing.B, rings map[string]*keyring.Ring, samples int) map[string][2]float64 {
	type pair struct {
		aPath, parent string
		inB           *arrivals
		total         []time.Duration
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	modes := make([]string, 0, len(rings))
	for mode := range rings {
		modes = append(modes, mode)
	}
	sort.Strings(modes)
	pairs := map[string]*pair{}
	for _, mode := range modes {
		_, hubURL := benchHub(b)
		na, nb := encStation(b, "ws-a", hubURL, rings[mode]), encStation(b, "ws-b", hubURL, rings[mode])
		defer na.stop()
		defer nb.stop()
		sid := "0199bebe-0000-7000-8000-000000000002"
		rel := sessionRel("/work/bench", sid)
		aPath, bPath := filepath.Join(na.cfg.SessionsDir, rel), filepath.Join(nb.cfg.SessionsDir, rel)
		if err := writeLines(aPath, []string{hdrLine(sid, "/work/bench"), msgLine("root", "", "start")}); err != nil {
			b.Fatal(err)
		}
		benchWait(b, 60*time.Second, "B's copy", func() bool {
			raw, _ := os.ReadFile(bPath)
			return len(splitLines(string(raw))) == 2
		})
		p := &pair{aPath: aPath, parent: "root", inB: newArrivals()}
		p.inB.followFile(ctx, b, bPath)
		pairs[mode] = p
	}
	text := strings.Repeat("a typical prompt of a few hundred bytes ", 8)
	for i := -20; i < samples; i++ { // 20 to warm up
		order := modes
		if (i+20)%2 == 1 {
			order = []string{modes[1], modes[0]}
		}
		for _, mode := range order {
			p := pairs[mode]
			id := fmt.Sprintf("lat%07d", i+20)
			t0 := time.Now()
			if err := writeLines(p.aPath, []string{msgLine(id, p.parent, text)}); err != nil {
				b.Fatal(err)
			}
			p.parent = id
			at, ok := p.inB.wait(id, 30*time.Second)
			if !ok {
				b.Fatalf("%s: entry %s never reached B", mode, id)
			}
			if i >= 0 {
				p.total = append(p.total, at.Sub(t0))
			}
		}
	}
	out := map[string][2]float64{}
	for mode, p := range pairs {
		sort.Slice(p.total, func(i, j int) bool { return p.total[i] < p.total[j] })
		out[mode] = [2]float64{ms(percentile(p.total, .5)), ms(percentile(p.total, .99))}
	}
	return out
}

// encCatchUp is the time B takes to catch up with n lines written on A
// while B was away.
func encCatchUp(b *testing.B, ring *keyring.Ring, n int) time.Duration {
	const sessions = 10
	_, hubURL := benchHub(b)
	na, nb := encStation(b, "ws-a", hubURL, ring), encStation(b, "ws-b", hubURL, ring)
	defer na.stop()
	aPaths, bPaths := catchUpSessions(b, na, nb, sessions)
	nb.stop()
	per := n / sessions
	writeBacklog(b, aPaths, per)
	want := make([]int64, len(aPaths))
	benchWait(b, 30*time.Minute, "A has forwarded its lines", func() bool {
		return na.d.fwd.Stats().Forwarded >= int64(sessions*2+per*sessions)
	})
	for i, p := range aPaths {
		st, err := os.Stat(p)
		if err != nil {
			b.Fatal(err)
		}
		want[i] = st.Size()
	}
	t0 := time.Now()
	nb.start()
	defer nb.stop()
	benchWait(b, 30*time.Minute, "B's files hold every line", func() bool {
		for i, p := range bPaths {
			if st, err := os.Stat(p); err != nil || st.Size() < want[i] {
				return false
			}
		}
		return true
	})
	took := time.Since(t0)
	for i := range aPaths {
		if err := sameFile(aPaths[i], bPaths[i]); err != nil {
			b.Fatal(err)
		}
	}
	return took
}
