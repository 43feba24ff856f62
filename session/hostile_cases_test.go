package session

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pisyncd/pisyncd/internal/testenv"
)

// testdata/hostile holds the disagreements the differential test found,
// minimised, each NAME.jsonl with NAME.expected.json: what real pi
// (pi-eval, mode report) answered for it under the bundles seed and 1.6.0,
// and a note saying what the case is about. Nothing in an expected file is
// hand-written; `go test ./session/ -run TestHostileCases -args -hostile.update`
// derives them again from real pi (it needs node).
var hostileUpdate = flag.Bool("hostile.update", false, "rewrite testdata/hostile/*.expected.json from real pi")

type hostileExpected struct {
	Note string                  `json:"note"`
	Pi   map[string]*piAnswerRaw `json:"pi"`
}

// piAnswerRaw keeps pi-eval's answer as it came, so that rewriting an
// expected file changes nothing encoding/json would spell otherwise.
type piAnswerRaw struct{ json.RawMessage }

func hostileDir(t *testing.T) string { return filepath.Join(testenv.TestdataDir(t), "hostile") }

// TestHostileCases checks every committed hostile case under the rule sets
// seed, pi-1.6 and auto against what real pi answered for it.
func TestHostileCases(t *testing.T) {
	files, _ := filepath.Glob(filepath.Join(hostileDir(t), "*.jsonl"))
	if len(files) == 0 {
		t.Fatal("no cases in testdata/hostile")
	}
	if *hostileUpdate {
		updateHostile(t, files)
	}
	for _, file := range files {
		name := strings.TrimSuffix(filepath.Base(file), ".jsonl")
		t.Run(name, func(t *testing.T) {
			raw, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			exp := readExpected(t, file)
			answers := map[RuleSet]*piAnswer{}
			for r, bundle := range piBundle {
				a := exp.Pi[bundle]
				if a == nil {
					t.Fatalf("no answer for %s", bundle)
				}
				answers[r] = new(piAnswer)
				if err := json.Unmarshal(a.RawMessage, answers[r]); err != nil {
					t.Fatal(err)
				}
			}
			for _, r := range diffRules {
				g := reportOf(raw, r)
				want := answers[g.Rules]
				if g.Rules == RulesAuto {
					want = answers[RulesSeed]
				}
				if d := disagreement(g, want); d != "" {
					t.Errorf("%s (%s): %s", r, exp.Note, d)
				}
			}
		})
	}
}

func readExpected(t *testing.T, file string) hostileExpected {
	var exp hostileExpected
	b, err := os.ReadFile(strings.TrimSuffix(file, ".jsonl") + ".expected.json")
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &exp); err != nil {
		t.Fatal(err)
	}
	return exp
}

// updateHostile asks real pi about every case and rewrites the expected
// files, keeping their notes (a new case without one gets "TODO").
func updateHostile(t *testing.T, files []string) {
	p := startPiEval(t, 10000, 512)
	for _, file := range files {
		note := "TODO: say what this case is about"
		if _, err := os.Stat(strings.TrimSuffix(file, ".jsonl") + ".expected.json"); err == nil {
			note = readExpected(t, file).Note
		}
		var b bytes.Buffer
		b.WriteString("{\n\"note\": ")
		b.Write(appendJSON(nil, note))
		b.WriteString(",\n\"pi\": {")
		for k, bundle := range []string{"seed", "1.6.0"} {
			a, err := p.eval(file, bundle)
			if err != nil {
				t.Fatal(err)
			}
			if k > 0 {
				b.WriteByte(',')
			}
			b.WriteString("\n\"" + bundle + "\": ")
			b.Write(a.raw)
		}
		b.WriteString("\n}\n}\n")
		if err := os.WriteFile(strings.TrimSuffix(file, ".jsonl")+".expected.json", b.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}
