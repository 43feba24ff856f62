package session

import (
	"bytes"
	"encoding/json"
	"errors"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/pisyncd/pisyncd/internal/testenv"
)

// corpusCase is one NAME.jsonl with its expected results.
type corpusCase struct {
	name     string
	raw      []byte
	expected map[string]any
	// results holds, per rule set key of the corpus ("seed", "1.6.0"),
	// the sections with sameAs resolved.
	results map[string]map[string]any
}

// corpusKey is the key of a rule set's results in a corpus file.
var corpusKey = map[RuleSet]string{RulesSeed: "seed", RulesPi16: "1.6.0"}

func loadCorpus(t *testing.T) []corpusCase {
	t.Helper()
	return loadCorpusDir(t, testenv.ConformanceDir(t))
}

// conformance16Dir is the corpus of pi 1.x files (testdata/conformance-1.6).
func conformance16Dir(t testing.TB) string {
	if d := os.Getenv("PISYNC_CONFORMANCE16_DIR"); d != "" {
		return d
	}
	return filepath.Join(testenv.TestdataDir(t), "conformance-1.6")
}

func loadCorpusDir(t *testing.T, dir string) []corpusCase {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "*.jsonl"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no corpus in %s: %v", dir, err)
	}
	var out []corpusCase
	for _, f := range files {
		name := strings.TrimSuffix(filepath.Base(f), ".jsonl")
		raw, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		exp, err := os.ReadFile(filepath.Join(dir, name+".expected.json"))
		if err != nil {
			t.Fatal(err)
		}
		var e map[string]any
		if err := json.Unmarshal(exp, &e); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		results := e["results"].(map[string]any)
		c := corpusCase{name: name, raw: raw, expected: e, results: map[string]map[string]any{}}
		for key, sections := range results {
			resolved := map[string]any{}
			for k, v := range sections.(map[string]any) {
				if m, ok := v.(map[string]any); ok && m["sameAs"] != nil {
					v = results[m["sameAs"].(string)].(map[string]any)[k]
				}
				resolved[k] = v
			}
			c.results[key] = resolved
		}
		out = append(out, c)
	}
	return out
}

// jsonValue round-trips v through encoding/json so that both sides are
// compared as the same kind of decoded value.
func jsonValue(t *testing.T, v any) any {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatalf("marshal: %v", err)
	}
	var out any
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatalf("unmarshal %s: %v", b, err)
	}
	return out
}

// renameIDs replaces Go's v1 ids by the oracle's, in values and keys.
func renameIDs(v any, m map[string]string) any {
	switch x := v.(type) {
	case string:
		if r, ok := m[x]; ok {
			return r
		}
		return x
	case []any:
		for i := range x {
			x[i] = renameIDs(x[i], m)
		}
		return x
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, val := range x {
			if r, ok := m[k]; ok {
				k = r
			}
			out[k] = renameIDs(val, m)
		}
		return out
	}
	return v
}

func isErrorResult(v any) bool {
	m, ok := v.(map[string]any)
	return ok && (m["error"] != nil || m["nonTerminating"] == true)
}

func compare(t *testing.T, what string, got, want any) {
	t.Helper()
	if !reflect.DeepEqual(got, want) {
		t.Errorf("%s differs at %s", what, firstDiff("", got, want))
	}
}

// TestConformance: the rule set seed against results.seed of the seed
// corpus (testdata/conformance).
func TestConformance(t *testing.T) { runCorpus(t, loadCorpus(t), RulesSeed) }

// TestConformancePi16: the rule set pi-1.6 against what real pi 1.6.0
// computes, on the seed corpus (its results["1.6.0"]) and on the corpus of
// pi 1.x files (testdata/conformance-1.6).
func TestConformancePi16(t *testing.T) {
	t.Run("seed-corpus", func(t *testing.T) { runCorpus(t, loadCorpus(t), RulesPi16) })
	t.Run("corpus-1.6", func(t *testing.T) { runCorpus(t, loadCorpusDir(t, conformance16Dir(t)), RulesPi16) })
}

// TestConformance16Seed: the seed rules on the pi 1.x corpus, against
// real pi with the seed rules (what pisyncd computed for these files
// before pi-1.6 existed, and what PISYNC_RULES=seed still gives).
func TestConformance16Seed(t *testing.T) {
	runCorpus(t, loadCorpusDir(t, conformance16Dir(t)), RulesSeed)
}

// TestConformanceAuto: RulesAuto on both corpora picks pi-1.6 exactly for
// the files that hold a line only pi >= 0.86 writes, and then matches the
// results of the rule set it picked.
func TestConformanceAuto(t *testing.T) {
	cases := append(loadCorpus(t), loadCorpusDir(t, conformance16Dir(t))...)
	picked := map[RuleSet]int{}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			want := RulesSeed
			if testenv.HoldsNewerLine(c.raw) {
				want = RulesPi16
			}
			f, err := LoadRules(c.raw, RulesAuto)
			if err == nil && f.Tree.Rules() != want {
				t.Fatalf("auto picked %v, want %v", f.Tree.Rules(), want)
			}
			picked[want]++
			runCase(t, c, RulesAuto, c.results[corpusKey[want]])
		})
	}
	if picked[RulesPi16] < 20 || picked[RulesSeed] < 40 {
		t.Errorf("auto picked %v: too few cases of one kind", picked)
	}
}

// runCorpus checks every case under the rule set r against the corpus's
// results for it.
func runCorpus(t *testing.T, cases []corpusCase, r RuleSet) {
	counts := map[string]int{}
	for _, c := range cases {
		want := c.results[corpusKey[r]]
		if want == nil {
			t.Errorf("%s: no results for %s", c.name, corpusKey[r])
			continue
		}
		t.Run(c.name, func(t *testing.T) {
			checked := runCase(t, c, r, want)
			for _, s := range checked {
				counts[s]++
			}
		})
	}
	var keys []string
	for k := range counts {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		t.Logf("%s: %d comparisons", k, counts[k])
	}
}

func runCase(t *testing.T, c corpusCase, r RuleSet, exp map[string]any) []string {
	var checked []string
	f, err := LoadRules(c.raw, r)
	if errors.Is(err, ErrEmptyFile) {
		// pi writes a fresh header: an empty session with invented id/time.
		compare(t, "context", map[string]any{"leafId": nil, "contextEntryIds": []any{}, "messages": []any{},
			"thinkingLevel": "off", "model": nil, "llmMessages": []any{}}, exp["context"])
		return []string{"context(empty)"}
	}
	if err != nil {
		for _, s := range []string{"context", "tree", "info"} {
			if !isErrorResult(exp[s]) {
				t.Errorf("Load: %v, but %s is %v", err, s, exp[s])
			}
		}
		checked = append(checked, "load-error")
	} else {
		rename := map[string]string{}
		if c.expected["idsNondeterministic"] == true {
			entries := exp["tree"].(map[string]any)["entries"].([]any)
			if len(entries) != f.Tree.Len() {
				t.Fatalf("entries: got %d want %d", f.Tree.Len(), len(entries))
			}
			for k, e := range entries {
				goID, _ := f.Tree.Entry(k).ID.String()
				rename[goID] = e.(map[string]any)["id"].(string)
			}
		}
		reverse := map[string]string{}
		for g, e := range rename {
			reverse[e] = g
		}
		got := func(v any) any { return renameIDs(jsonValue(t, v), rename) }

		// context at the file's leaf
		if want := exp["context"]; want != nil {
			ctx, err := f.Context()
			if isErrorResult(want) {
				if err == nil {
					t.Errorf("context: want error %v, got none", want)
				}
			} else if err != nil {
				t.Errorf("context: %v", err)
			} else {
				g := got(ctx).(map[string]any)
				wm := want.(map[string]any)
				if wm["llmMessages"] != nil {
					llm, err := ctx.LLMMessages()
					if err != nil {
						t.Errorf("convertToLlm: %v", err)
					}
					g["llmMessages"] = got(llm)
					checked = append(checked, "llmMessages")
				}
				compare(t, "context", g, want)
			}
			checked = append(checked, "context")
		}
		// contextAt
		if at, ok := exp["contextAt"].(map[string]any); ok {
			for key, want := range at {
				var ctx *Context
				var err error
				if key == "null" {
					ctx, err = f.ContextAt(nil)
				} else {
					id := key
					if r, ok := reverse[key]; ok {
						id = r
					}
					ctx, err = f.ContextAt(&id)
				}
				if isErrorResult(want) {
					if err == nil {
						t.Errorf("contextAt %s: want error, got none", key)
					}
				} else if err != nil {
					t.Errorf("contextAt %s: %v", key, err)
				} else {
					compare(t, "contextAt "+key, got(ctx), want)
				}
				checked = append(checked, "contextAt")
			}
		}
		if want := exp["tree"]; want != nil {
			compare(t, "tree", got(treeSection(t, f.Tree)), want)
			checked = append(checked, "tree")
		}
		if want := exp["info"]; want != nil {
			compare(t, "info", got(infoSection(t, f.Tree)), want)
			checked = append(checked, "info")
		}
		if want, ok := exp["migrate"].(map[string]any); ok {
			h, err := f.Tree.MigratedHeader()
			if err != nil {
				t.Fatal(err)
			}
			entries, err := f.MigratedEntries()
			if err != nil {
				t.Fatal(err)
			}
			g := got(map[string]any{"header": h, "entries": entries}).(map[string]any)
			if want["entriesAbbreviated"] != nil {
				// large fixtures record only id/parentId/type per entry
				for i, e := range g["entries"].([]any) {
					m := map[string]any{}
					for _, k := range []string{"id", "parentId", "type", "firstKeptEntryId"} {
						if v, ok := e.(map[string]any)[k]; ok {
							m[k] = v
						}
					}
					g["entries"].([]any)[i] = m
				}
			}
			compare(t, "migrate", g, map[string]any{"header": want["header"], "entries": want["entries"]})
			checked = append(checked, "migrate")
		}
	}
	if want, ok := exp["list"]; ok {
		compare(t, "list", jsonValue(t, listSection(t, c.name, c.raw)), want)
		checked = append(checked, "list")
	}
	return checked
}

func idsOf(tr *Tree, pos []int) []ID {
	out := make([]ID, len(pos))
	for k, i := range pos {
		out[k] = tr.Entry(i).ID
	}
	return out
}

func treeSection(t *testing.T, tr *Tree) map[string]any {
	out, err := treeReport(tr)
	if err != nil {
		t.Fatalf("GetTree: %v", err)
	}
	return out.(map[string]any)
}

func infoSection(t *testing.T, tr *Tree) map[string]any {
	out, err := infoReport(tr)
	if err != nil {
		t.Fatal(err)
	}
	return out.(map[string]any)
}

// listSection mirrors pi-oracle's list output, mtime pinned to 2000-01-01.
func listSection(t *testing.T, name string, raw []byte) any {
	mtime := float64(946684800000)
	s, ok, err := Summarize(bytes.NewReader(raw), mtime)
	if err != nil {
		t.Fatal(err)
	}
	if !ok {
		return nil
	}
	out := map[string]any{
		"file":              name + ".jsonl",
		"id":                s.ID,
		"cwd":               s.Cwd,
		"name":              nil,
		"parentSessionPath": s.ParentSessionPath,
		"created":           nil,
		"modified":          nil,
		"messageCount":      s.MessageCount,
		"firstMessage":      s.FirstMessage,
		"allMessagesText":   s.AllMessagesText,
	}
	if s.ParentSessionPath == nil {
		out["parentSessionPath"] = nil
	}
	if s.HasName {
		out["name"] = s.Name
	}
	if v, ok := s.CreatedISO(); ok {
		out["created"] = v
	}
	if v, ok := s.ModifiedISO(); ok {
		out["modified"] = v
	}
	_ = math.NaN
	return out
}

// firstDiff describes where two decoded JSON values first differ.
func firstDiff(path string, got, want any) string {
	switch w := want.(type) {
	case map[string]any:
		g, ok := got.(map[string]any)
		if !ok {
			break
		}
		for k := range w {
			if _, ok := g[k]; !ok {
				return path + "." + k + ": missing"
			}
		}
		for k := range g {
			if _, ok := w[k]; !ok {
				return path + "." + k + ": unexpected"
			}
		}
		for k := range w {
			if !reflect.DeepEqual(g[k], w[k]) {
				return firstDiff(path+"."+k, g[k], w[k])
			}
		}
	case []any:
		g, ok := got.([]any)
		if !ok || len(g) != len(w) {
			break
		}
		for i := range w {
			if !reflect.DeepEqual(g[i], w[i]) {
				return firstDiff(path+"["+strconv.Itoa(i)+"]", g[i], w[i])
			}
		}
	}
	gb, _ := json.Marshal(got)
	wb, _ := json.Marshal(want)
	return path + ":\n got: " + clip(string(gb)) + "\nwant: " + clip(string(wb))
}

func clip(s string) string {
	if len(s) > 400 {
		return s[:400] + "..."
	}
	return s
}
