package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/pisyncd/pisyncd/internal/testenv"
)

// corpusContext is a case's expected context per corpus rule set key
// ("seed", "1.6.0"), sameAs resolved; nil when the case is left out.
func corpusContexts(t *testing.T, path string) map[string]any {
	t.Helper()
	raw, err := os.ReadFile(strings.TrimSuffix(path, ".jsonl") + ".expected.json")
	if err != nil {
		t.Fatal(err)
	}
	var exp struct {
		IDsNondeterministic bool                                  `json:"idsNondeterministic"`
		Results             map[string]map[string]json.RawMessage `json:"results"`
	}
	if err := json.Unmarshal(raw, &exp); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	if exp.IDsNondeterministic {
		return nil // v1 files: pi's ids are random (session/ compares them by position)
	}
	out := map[string]any{}
	for _, key := range []string{"seed", "1.6.0"} {
		sec := exp.Results[key]["context"]
		var same struct {
			SameAs string `json:"sameAs"`
		}
		if json.Unmarshal(sec, &same) == nil && same.SameAs != "" {
			sec = exp.Results[same.SameAs]["context"]
		}
		var v map[string]any
		if err := json.Unmarshal(sec, &v); err != nil {
			t.Fatalf("%s: %s: %v", path, key, err)
		}
		if v["nonTerminating"] == true {
			return nil // pi never returns (a parentId cycle)
		}
		delete(v, "llmMessages")
		out[key] = v
	}
	return out
}

// contextOut runs `pisyncd context ARGS --json` and splits its output into
// the rule set fields and the corpus shape.
func contextOut(t *testing.T, args ...string) (rules, mode string, ctx map[string]any, err error) {
	t.Helper()
	var out bytes.Buffer
	if err := contextCommand(append(args, "--json"), &out); err != nil {
		return "", "", nil, err
	}
	if err := json.Unmarshal(out.Bytes(), &ctx); err != nil {
		t.Fatalf("context %v: %v\n%s", args, err, out.String())
	}
	rules, _ = ctx["rules"].(string)
	mode, _ = ctx["rulesMode"].(string)
	delete(ctx, "rules")
	delete(ctx, "rulesMode")
	return rules, mode, ctx, nil
}

// TestContextRulesCorpus: `pisyncd context FILE --rules SET` on every
// case of both corpora gives what real pi computes under that set
// (results.seed for seed, results["1.6.0"] for pi-1.6), says which set it
// used, and auto (asked for, or PISYNC_RULES, or the default) resolves to
// pi-1.6 exactly for the files holding a line only pi >= 0.86 writes.
func TestContextRulesCorpus(t *testing.T) {
	dirs := []string{testenv.ConformanceDir(t), filepath.Join(testenv.TestdataDir(t), "conformance-1.6")}
	var files []string
	for _, d := range dirs {
		fs, _ := filepath.Glob(filepath.Join(d, "*.jsonl"))
		files = append(files, fs...)
	}
	key := map[string]string{"seed": "seed", "pi-1.6": "1.6.0"}
	compared, differ, newer, left := 0, 0, 0, 0
	for _, path := range files {
		t.Run(strings.TrimSuffix(filepath.Base(path), ".jsonl"), func(t *testing.T) {
			want := corpusContexts(t, path)
			data, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			if want == nil || len(data) == 0 {
				// Random ids (v1), an empty file that pi fills afresh,
				// or a context pi never returns: session/ covers them.
				left++
				return
			}
			auto := "seed"
			if testenv.HoldsNewerLine(data) {
				auto = "pi-1.6"
				newer++
			}
			if !reflect.DeepEqual(want["seed"], want["1.6.0"]) {
				differ++
			}
			check := func(label, resolved, asked string, args ...string) {
				t.Helper()
				rules, mode, got, err := contextOut(t, append([]string{path}, args...)...)
				exp := want[key[resolved]].(map[string]any)
				if exp["error"] != nil {
					if err == nil {
						t.Errorf("%s: no error, pi says %v", label, exp["error"])
					}
					return
				}
				if err != nil {
					t.Fatalf("%s: %v", label, err)
				}
				if rules != resolved || mode != asked {
					t.Errorf("%s: rules %q rulesMode %q, want %q %q", label, rules, mode, resolved, asked)
				}
				if !reflect.DeepEqual(got, exp) {
					g, _ := json.Marshal(got)
					w, _ := json.Marshal(exp)
					t.Errorf("%s: context differs from pi's\n got %.400s\nwant %.400s", label, g, w)
				}
				compared++
			}
			check("--rules seed", "seed", "seed", "--rules", "seed")
			check("--rules pi-1.6", "pi-1.6", "pi-1.6", "--rules", "pi-1.6")
			check("--rules auto", auto, "auto", "--rules", "auto")
			check("default", auto, "auto")
			t.Setenv("PISYNC_RULES", "pi-1.6")
			check("PISYNC_RULES=pi-1.6", "pi-1.6", "pi-1.6")
			check("--rules over PISYNC_RULES", "seed", "seed", "--rules=seed")
		})
	}
	if compared < 400 || differ < 20 || newer < 20 {
		t.Errorf("%d comparisons, %d cases where the sets differ, %d files auto reads as pi 1.x: too few", compared, differ, newer)
	}
	t.Logf("%d comparisons over %d files (%d left to session/); the sets differ on %d; auto picks pi-1.6 for %d", compared, len(files), left, differ, newer)
}

// TestContextRulesFlag: a bad --rules or PISYNC_RULES is a clear error,
// and the human form names the set.
func TestContextRulesFlag(t *testing.T) {
	file := filepath.Join(testenv.TestdataDir(t), "conformance-1.6", "writer16-context-edit-retry.jsonl")
	err := contextCommand([]string{file, "--rules", "1.6"}, &bytes.Buffer{})
	if !errors.Is(err, errUsage) || !strings.Contains(err.Error(), `--rules "1.6": want auto, seed or pi-1.6`) {
		t.Errorf("bad --rules: %v", err)
	}
	if err := contextCommand([]string{"some-session-id", "--rules", "new"}, &bytes.Buffer{}); !errors.Is(err, errUsage) {
		t.Errorf("bad --rules with a session id: %v", err)
	}
	t.Setenv("PISYNC_RULES", "newest")
	if err := contextCommand([]string{file}, &bytes.Buffer{}); err == nil || !strings.Contains(err.Error(), `PISYNC_RULES "newest"`) {
		t.Errorf("bad PISYNC_RULES: %v", err)
	}
	t.Setenv("PISYNC_RULES", "auto")
	for args, want := range map[string]string{
		"":               "rules pi-1.6 (auto-chosen: the session holds a line only pi >= 0.86 writes)",
		"--rules=seed":   "rules seed (set by --rules or PISYNC_RULES)",
		"--rules=pi-1.6": "rules pi-1.6 (set by --rules or PISYNC_RULES)",
	} {
		var out bytes.Buffer
		if err := contextCommand(append([]string{file}, strings.Fields(args)...), &out); err != nil || !strings.Contains(out.String(), "\n"+want+"\n") {
			t.Errorf("context %s: %v\n%s", args, err, out.String())
		}
	}
	var out bytes.Buffer
	seedFile := filepath.Join(testenv.ConformanceDir(t), "basic-linear.jsonl")
	if err := contextCommand([]string{seedFile}, &out); err != nil || !strings.Contains(out.String(), "\nrules seed (auto-chosen: no line only pi >= 0.86 writes)\n") {
		t.Errorf("context of a 0.85 file: %v\n%s", err, out.String())
	}
}

// TestContextFileDeepContent: content nested 20,000 levels deep, which pi
// reads and passes through, is written by `context FILE --json` too
// (encoding/json's compactor stops at 10,000 levels; the streamed writer
// must not).
func TestContextFileDeepContent(t *testing.T) {
	path := filepath.Join(testenv.TestdataDir(t), "hostile", "v3-depth-20000.jsonl")
	var out bytes.Buffer
	if err := contextFileCommand([]string{path, "--json"}, &out); err != nil {
		t.Fatalf("context %s --json: %v", path, err)
	}
	if got := strings.Count(out.String(), "["); got < 20000 {
		t.Fatalf("context holds %d '[', want the 20,000 levels of the file", got)
	}
	if !strings.HasPrefix(out.String(), `{"rules":"seed","rulesMode":"auto","leafId":"a2","contextEntryIds":["a1","a2"],`) {
		t.Fatalf("context starts %.120q", out.String())
	}
}
