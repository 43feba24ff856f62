package session

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/pisyncd/pisyncd/internal/testenv"
)

// piEval is one `node testdata/pi-eval/pi-eval.mjs serve` process: it
// evaluates many files with the real pi code, one at a time, each section
// under a deadline (a section pi never returns from is reported as
// nonTerminating) in a bounded child process of its own.
type piEval struct {
	cmd  *exec.Cmd
	in   io.WriteCloser
	out  *bufio.Reader
	next int
}

// piAnswer is pi-eval's answer for one file.
type piAnswer struct {
	Load     string      `json:"load"` // ok, error, empty, nonTerminating, driver-error
	Error    string      `json:"error"`
	Sections []piSection `json:"sections"`
	raw      []byte      // the answer as pi-eval wrote it, without its id
}

type piSection struct {
	Key            jsKey   `json:"key"`
	Text           *string `json:"text"`
	Error          *string `json:"error"`
	NonTerminating bool    `json:"nonTerminating"`
}

// jsKey is a string decoded as JSON.parse does: encoding/json would
// replace a lone surrogate of an id by U+FFFD.
type jsKey string

func (k *jsKey) UnmarshalJSON(b []byte) error {
	s, ok := jsString(b)
	if !ok {
		return fmt.Errorf("pi-eval: key %s is not a string", b)
	}
	*k = jsKey(s)
	return nil
}

// startPiEval starts pi-eval with a per-section deadline of timeoutMs; it
// is stopped when the test ends. heapMb bounds the heap of pi's process:
// it must hold a file's huge values several times over, and it is what a
// parentId cycle exhausts before pi counts as non-terminating. Without node the test skips (fails under
// CI=true).
func startPiEval(t testing.TB, timeoutMs, heapMb int) *piEval {
	t.Helper()
	testenv.Oracle(t)
	script := filepath.Join(testenv.TestdataDir(t), "pi-eval", "pi-eval.mjs")
	cmd, in, out := startNode(t, nil, nil, script, "serve", "--timeout", strconv.Itoa(timeoutMs), "--heap", strconv.Itoa(heapMb))
	p := &piEval{cmd: cmd, in: in, out: out}
	t.Cleanup(func() {
		// Closing stdin ends the serve loop; pi-eval kills its worker.
		in.Close()
		if err := cmd.Wait(); err != nil {
			t.Logf("pi-eval exited: %v", err)
		}
	})
	return p
}

// startNode starts node with args (and env added to this process's), talking
// over its stdin and stdout, its stderr to stderr (nil: discarded); stopping
// it is the caller's.
func startNode(t testing.TB, stderr io.Writer, env []string, args ...string) (*exec.Cmd, io.WriteCloser, *bufio.Reader) {
	t.Helper()
	cmd := exec.Command("node", args...)
	// pi-eval copies each file into a directory of TMPDIR and removes it,
	// except in a worker killed over a file pi never finishes (a parentId
	// cycle): under the test's own directory, those go with it.
	cmd.Env = append(append(os.Environ(), env...), "TMPDIR="+t.TempDir())
	cmd.Stderr = stderr
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatalf("node %s: %v", args[0], err)
	}
	return cmd, in, bufio.NewReaderSize(out, 1<<20)
}

// eval asks for the report sections of file under the pi bundle pi
// ("seed" or "1.6.0").
func (p *piEval) eval(file, pi string) (*piAnswer, error) {
	p.next++
	req, _ := json.Marshal(map[string]any{"id": p.next, "file": file, "pi": pi, "mode": "report"})
	if _, err := p.in.Write(append(req, '\n')); err != nil {
		return nil, fmt.Errorf("pi-eval: write: %w", err)
	}
	line, err := p.out.ReadBytes('\n')
	if err != nil {
		return nil, fmt.Errorf("pi-eval: read: %w", err)
	}
	var a piAnswer
	if err := json.Unmarshal(line, &a); err != nil {
		return nil, fmt.Errorf("pi-eval: answer: %w", err)
	}
	// pi-eval appends the request's id last; drop it so that answers to
	// the same file compare equal.
	a.raw = bytes.TrimRight(line, "\n")
	if i := bytes.LastIndex(a.raw, []byte(`,"id":`)); i >= 0 {
		a.raw = append(a.raw[:i:i], '}')
	}
	if a.Load == "driver-error" {
		return nil, fmt.Errorf("pi-eval: driver: %s", a.Error)
	}
	return &a, nil
}

// piBundle is the pi-eval bundle of a rule set.
var piBundle = map[RuleSet]string{RulesSeed: "seed", RulesPi16: "1.6.0"}

// goSection is pisyncd's result for one report section: the canonical
// text, or the error it reports.
type goSection struct {
	Key  string
	Text string
	Err  error
}

// goReport is what pisyncd computes for the sections pi-eval reports
// (worker.mjs plan, mode "report"). load is nil when the file loaded.
type goReport struct {
	Rules    RuleSet // the rule set the contexts follow (what auto picked)
	Load     error
	Sections []goSection
}

// reportOf computes pisyncd's side of a pi-eval report for raw under the
// rule set mode.
func reportOf(raw []byte, mode RuleSet) goReport {
	f, err := LoadRules(raw, mode)
	if err != nil {
		return goReport{Rules: mode, Load: err}
	}
	rep := goReport{Rules: f.Tree.Rules()}
	ids := make([]any, f.Tree.Len())
	for i := range ids {
		if s, ok := f.Tree.Entry(i).ID.String(); ok {
			ids[i] = s
		}
	}
	keys := []string{"context"}
	for _, id := range reportLeavesGo(ids, 25, 4) {
		keys = append(keys, "at:"+id)
	}
	keys = append(keys, "at:null", "tree", "info")
	for _, k := range keys {
		s := goSection{Key: k}
		var v any
		switch {
		case k == "context":
			v, s.Err = contextWithLLM(f.Context())
		case k == "at:null":
			v, s.Err = contextWithLLM(f.ContextAt(nil))
		case strings.HasPrefix(k, "at:"):
			id := k[3:]
			v, s.Err = contextWithLLM(f.ContextAt(&id))
		case k == "tree":
			v, s.Err = treeReport(f.Tree)
		case k == "info":
			v, s.Err = infoReport(f.Tree)
		}
		if s.Err == nil {
			s.Text, s.Err = c14nOf(v)
			if s.Err != nil {
				s.Err = fmt.Errorf("c14n of pisyncd's own output: %w", s.Err)
			}
		}
		rep.Sections = append(rep.Sections, s)
	}
	return rep
}

// reportLeavesGo is sections.mjs reportLeaves over string ids (nil for
// others): every distinct id when there are at most all, else the first and
// last ends of them.
func reportLeavesGo(ids []any, all, ends int) []string {
	seen := map[string]bool{}
	var distinct []string
	for _, v := range ids {
		s, ok := v.(string)
		if !ok || seen[s] {
			continue
		}
		seen[s] = true
		distinct = append(distinct, s)
	}
	if len(distinct) <= all {
		return distinct
	}
	return append(append([]string{}, distinct[:ends]...), distinct[len(distinct)-ends:]...)
}

// contextWithLLM is sections.mjs contextSection: the context with its
// llmMessages.
func contextWithLLM(c *Context, err error) (any, error) {
	if err != nil {
		return nil, err
	}
	body, err := c.MarshalJSON()
	if err != nil {
		return nil, err
	}
	llm, err := c.LLMMessages()
	if err != nil {
		return nil, err
	}
	b, err := rawOf(func() []any {
		out := make([]any, len(llm))
		for k, m := range llm {
			out[k] = m
		}
		return out
	}())
	if err != nil {
		return nil, err
	}
	out := append(body[:len(body)-1:len(body)-1], `,"llmMessages":`...)
	return json.RawMessage(append(append(out, b...), '}')), nil
}

// treeReport is sections.mjs treeSection.
func treeReport(tr *Tree) (any, error) {
	roots, err := tr.GetTree()
	if err != nil {
		return nil, err
	}
	children := map[string]any{}
	seen := map[*TreeNode]bool{}
	stack := append([]*TreeNode{}, roots...)
	for len(stack) > 0 {
		n := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		if seen[n] {
			continue
		}
		seen[n] = true
		if len(n.Children) > 0 {
			kids := make([]int, len(n.Children))
			for k, c := range n.Children {
				kids[k] = c.Entry
			}
			children[tr.Entry(n.Entry).ID.propName()] = idsOf(tr, kids)
		}
		stack = append(stack, n.Children...)
	}
	rootIDs := make([]int, len(roots))
	for k, r := range roots {
		rootIDs[k] = r.Entry
	}
	ins := map[string]any{}
	for k, v := range tr.InsertionChildren() {
		ins[k] = idsOf(tr, v)
	}
	entries := make([]any, tr.Len())
	for i := range entries {
		e := tr.Entry(i)
		m := map[string]any{}
		for k, id := range map[string]ID{"id": e.ID, "parentId": e.ParentID, "type": e.Type} {
			if !id.IsUndefined() {
				m[k] = id
			}
		}
		entries[i] = m
	}
	out := map[string]any{
		"roots":             idsOf(tr, rootIDs),
		"children":          children,
		"insertionChildren": ins,
		"preorder":          idsOf(tr, Preorder(roots)),
		"labels":            tr.Labels(),
		"entries":           entries,
	}
	if !tr.Leaf().IsUndefined() {
		out["leafId"] = tr.Leaf()
	}
	return out, nil
}

// infoReport is sections.mjs infoSection.
func infoReport(tr *Tree) (any, error) {
	h, err := tr.MigratedHeader()
	if err != nil {
		return nil, err
	}
	name, ok, err := tr.Name()
	if err != nil {
		return nil, err
	}
	out := map[string]any{
		"sessionId":   tr.SessionID(),
		"header":      h,
		"sessionName": nil,
		"entryCount":  tr.Len(),
		"labels":      tr.Labels(),
	}
	if ok {
		out["sessionName"] = name
	}
	if !tr.Leaf().IsUndefined() {
		out["leafId"] = tr.Leaf()
	}
	return out, nil
}

// disagreement compares pisyncd's report with pi's answer and describes
// the first difference ("" when they agree). Where pi throws, rejects the
// file or never returns, pisyncd must report an error.
func disagreement(g goReport, p *piAnswer) string {
	switch p.Load {
	case "empty":
		if !errors.Is(g.Load, ErrEmptyFile) {
			return fmt.Sprintf("pi: empty file (a new session); pisyncd: %v", g.Load)
		}
		return ""
	case "error", "nonTerminating":
		if g.Load == nil {
			return fmt.Sprintf("pi: load %s (%s); pisyncd loads the file", p.Load, clip(p.Error))
		}
		return ""
	case "ok":
	default:
		return "pi: unknown load " + p.Load
	}
	if g.Load != nil {
		return fmt.Sprintf("pi loads the file; pisyncd: %v", g.Load)
	}
	if len(g.Sections) != len(p.Sections) {
		return fmt.Sprintf("sections: pisyncd %v, pi %v", goKeys(g.Sections), piKeys(p.Sections))
	}
	for k, ps := range p.Sections {
		gs := g.Sections[k]
		if gs.Key != string(ps.Key) {
			return fmt.Sprintf("sections: pisyncd %v, pi %v", goKeys(g.Sections), piKeys(p.Sections))
		}
		switch {
		case ps.NonTerminating || ps.Error != nil:
			if gs.Err == nil {
				why := "never returns"
				if ps.Error != nil {
					why = "throws " + clip(*ps.Error)
				}
				return fmt.Sprintf("%s: pi %s; pisyncd: %s", ps.Key, why, clip(gs.Text))
			}
		case gs.Err != nil:
			return fmt.Sprintf("%s: pisyncd: %v; pi: %s", ps.Key, gs.Err, clip(*ps.Text))
		case gs.Text != *ps.Text:
			return fmt.Sprintf("%s: %s", ps.Key, textDiff(gs.Text, *ps.Text))
		}
	}
	return ""
}

// textDiff shows two canonical texts around where they first differ.
func textDiff(got, want string) string {
	i := 0
	for i < len(got) && i < len(want) && got[i] == want[i] {
		i++
	}
	from := max(0, i-80)
	return fmt.Sprintf("at byte %d\n pisyncd: …%s\n      pi: …%s", i, clip(got[from:]), clip(want[from:]))
}

func goKeys(s []goSection) []string {
	out := make([]string, len(s))
	for k := range s {
		out[k] = s[k].Key
	}
	return out
}

func piKeys(s []piSection) []string {
	out := make([]string, len(s))
	for k := range s {
		out[k] = string(s[k].Key)
	}
	return out
}

// TestPiEvalLargeAnswerBeforeLoop: a section pi answers with megabytes is
// reported even when the next section never returns. pi-eval's worker used
// to queue the answer and go on: the IPC socket took a few hundred KB, the
// endless section blocked the rest until the heap ran out, and the answer
// died with the worker, so the section looked as if pi never returned from
// it (seed 11 files 727, 1023 and 4630 of the differential run).
func TestPiEvalLargeAnswerBeforeLoop(t *testing.T) {
	if testing.Short() {
		t.Skip("runs node")
	}
	p := startPiEval(t, 10000, 96)
	big := strings.Repeat("x", 1<<20)
	file := filepath.Join(t.TempDir(), "big.jsonl")
	raw := `{"type":"session","version":3,"id":"s1","timestamp":"2026-01-01T00:00:00.000Z","cwd":"/"}` + "\n" +
		// an unknown role: in messages, not in llmMessages, so the answer is
		// the string once
		`{"type":"message","id":"a","parentId":null,"timestamp":"2026-01-01T00:00:01.000Z","message":{"role":"bogus","content":"` + big + `"}}` + "\n" +
		// a parentId cycle: pi's path never ends (the file's leaf, at:c)
		`{"type":"message","id":"c","parentId":"c","timestamp":"2026-01-01T00:00:02.000Z","message":{"role":"user","content":"loop","timestamp":1}}` + "\n"
	if err := os.WriteFile(file, []byte(raw), 0o644); err != nil {
		t.Fatal(err)
	}
	a, err := p.eval(file, "seed")
	if err != nil {
		t.Fatal(err)
	}
	if a.Load != "ok" {
		t.Fatalf("load %s: %s", a.Load, a.Error)
	}
	got := map[string]piSection{}
	for _, s := range a.Sections {
		got[string(s.Key)] = s
	}
	if s := got["at:a"]; s.Text == nil || !strings.Contains(*s.Text, big) {
		t.Errorf("at:a: nonTerminating %v, error %v, text of %d bytes; want the message", s.NonTerminating, s.Error, len(deref(s.Text)))
	}
	for _, k := range []string{"context", "at:c"} {
		if !got[k].NonTerminating {
			t.Errorf("%s: pi returned (%d bytes, error %v); want nonTerminating", k, len(deref(got[k].Text)), got[k].Error)
		}
	}
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}
