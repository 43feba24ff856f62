package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/pisyncd/pisyncd/keyring"
)

// BenchmarkEncryption measures, in one run, what end-to-end encryption
// costs: replication latency A → B (p50, p99 over PISYNC_BENCH_SAMPLES
// lines, default 300) and catch-up rate (B offline while A writes
// PISYNC_BENCH_CATCHUP lines, default 20000, in 10 sessions; then the
// time until B's files hold them all), plain and sealed, with the sealed
// / plain ratios. Each mode gets its own hub and workstations.
func BenchmarkEncryption(b *testing.B) {
	samples, n := envInt(b, "PISYNC_BENCH_SAMPLES", 300), envInt(b, "PISYNC_BENCH_CATCHUP", 20000)
	for iter := 0; iter < b.N; iter++ {
		res := map[string][3]float64{}
		for _, mode := range []string{"plain", "sealed"} {
			var ring *keyring.Ring
			if mode == "sealed" {
				ring = keyring.New(time.Now())
			}
			p50, p99 := encLatency(b, ring, samples)
			rate := encCatchUp(b, ring, n)
			res[mode] = [3]float64{p50, p99, rate}
			b.ReportMetric(p50, mode+"-p50-ms")
			b.ReportMetric(p99, mode+"-p99-ms")
			b.ReportMetric(rate, mode+"-catchup-lines/s")
		}
		b.ReportMetric(res["sealed"][0]/res["plain"][0], "p50-sealed/plain")
		b.ReportMetric(res["sealed"][1]/res["plain"][1], "p99-sealed/plain")
		b.ReportMetric(res["sealed"][2]/res["plain"][2], "catchup-sealed/plain")
	}
}

func envInt(b *testing.B, name string, def int) int {
	if s := os.Getenv(name); s != "" {
		v, err := strconv.Atoi(s)
		if err != nil || v < 1 {
			b.Fatalf("%s=%q: want a positive number", name, s)
		}
		return v
	}
	return def
}

// encStation is benchStation with PISYNC_ENCRYPT=on and ring as the team
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

// encLatency is the p50 and p99 latency in ms of samples lines A → B's file.
func encLatency(b *testing.B, ring *keyring.Ring, samples int) (float64, float64) {
	_, hubURL := benchHub(b)
	na, nb := encStation(b, "ws-a", hubURL, ring), encStation(b, "ws-b", hubURL, ring)
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
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	inB := newArrivals()
	inB.followFile(ctx, b, bPath)
	text := strings.Repeat("a typical prompt of a few hundred bytes ", 8)
	parent := "root"
	var total []time.Duration
	for i := -20; i < samples; i++ { // 20 to warm up
		id := fmt.Sprintf("lat%07d", i+20)
		t0 := time.Now()
		if err := writeLines(aPath, []string{msgLine(id, parent, text)}); err != nil {
			b.Fatal(err)
		}
		parent = id
		at, ok := inB.wait(id, 30*time.Second)
		if !ok {
			b.Fatalf("entry %s never reached B", id)
		}
		if i >= 0 {
			total = append(total, at.Sub(t0))
		}
	}
	sort.Slice(total, func(i, j int) bool { return total[i] < total[j] })
	return ms(percentile(total, .5)), ms(percentile(total, .99))
}

// encCatchUp is B's catch-up rate in lines/s after n lines written on A
// while B was away.
func encCatchUp(b *testing.B, ring *keyring.Ring, n int) float64 {
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
	rate := float64(per*sessions) / time.Since(t0).Seconds()
	for i := range aPaths {
		if err := sameFile(aPaths[i], bPaths[i]); err != nil {
			b.Fatal(err)
		}
	}
	return rate
}
