package main

import (
	"bufio"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"runtime/debug"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/pisyncd/pisyncd/config"
	"github.com/pisyncd/pisyncd/projection"
	"github.com/pisyncd/pisyncd/session"
)

// contextFileCommand is `pisyncd context FILE`: pi's rules applied to the
// file directly, no daemon needed.
func contextFileCommand(args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("context", flag.ContinueOnError)
	asJSON := fs.Bool("json", false, contextJSONUsage)
	leaf := fs.String("leaf", "", "build the context at this entry id instead of the file's leaf")
	rules := fs.String("rules", "", contextRulesUsage)
	if err := parseArgs(fs, reorder(args, contextValued...), contextUsage, 1); err != nil {
		return err
	}
	mode, err := contextRules(*rules)
	if err != nil {
		return err
	}
	if *rules == "" {
		// PISYNC_RULES alone: `context FILE` needs no other setting.
		if mode, err = config.LoadRules(); err != nil {
			return err
		}
	}
	pos := fs.Args()
	return writeFileContext(stdout, pos[0], *leaf, *asJSON, mode)
}

// writeFileContext writes the context of the session file path at leaf
// ("" for its own) under the rule set mode: the corpus JSON, or the human
// summary.
func writeFileContext(stdout io.Writer, path, leafArg string, asJSON bool, mode session.RuleSet) (err error) {
	var leaf *string
	if leafArg != "" {
		leaf = &leafArg
	}
	// The file may be mapped (loadContextFile): a fault on it (the file cut
	// short by another process while it is read) is an error, not a crash.
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer faultAsError(path, &err)
	file, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("context: %w", err)
	}
	defer file.Close()
	st, err := file.Stat()
	if err != nil {
		return fmt.Errorf("context: %w", err)
	}
	if st.Size() <= wholeFileMax {
		// A one-shot command: the garbage of one scan of at most 32 MiB
		// is cheaper to leave than to collect (the collector would run
		// several times while the heap grows from nothing). The soft limit
		// still bounds it; both are put back for a caller in the same
		// process (tests).
		defer debug.SetGCPercent(debug.SetGCPercent(-1))
		if os.Getenv("GOMEMLIMIT") == "" {
			defer debug.SetMemoryLimit(debug.SetMemoryLimit(oneShotMemory + 4*st.Size()))
		}
	}
	tree, f, unmap, err := loadContextFile(file, st.Size(), mode)
	if err != nil {
		return fmt.Errorf("context: %s: %w", path, err)
	}
	defer unmap()
	var ix *session.Index
	if leaf == nil {
		ix, err = tree.Index()
	} else {
		ix, err = tree.IndexAt(leaf)
	}
	if err != nil {
		return fmt.Errorf("context: %s: %w", path, err)
	}
	if asJSON {
		// Held back up to 1 MiB, so a failure prints nothing unless the
		// context is larger.
		bw := bufio.NewWriterSize(stdout, 1<<20)
		widenPipe(stdout)
		if err := projection.WriteContextJSON(bw, ix, f, mode); err != nil {
			return fmt.Errorf("context: %s: %w", path, err)
		}
		bw.WriteByte('\n')
		return bw.Flush()
	}
	leafID, _ := ix.LeafID.String()
	sum := &contextSummary{leaf: leafID, entries: len(ix.EntryIDs), model: ix.Model, thinking: ix.ThinkingLevel,
		rules: ix.Rules.String(), rulesMode: mode.String()}
	err = ix.EachMessage(f, func(m json.RawMessage) error {
		sum.add(m)
		return nil
	})
	if err != nil {
		return fmt.Errorf("context: %s: %w", path, err)
	}
	return sum.print(stdout)
}

// faultAsError, deferred, turns a fault on an address (a mapped file cut
// short under SetPanicOnFault) into *err; a bug (a nil pointer, which
// carries no address) stays a crash.
func faultAsError(path string, err *error) {
	r := recover()
	if r == nil {
		return
	}
	if _, ok := r.(interface{ Addr() uintptr }); !ok {
		panic(r)
	}
	*err = fmt.Errorf("context: %s: the file changed while it was read (%v)", path, r)
}

// wholeFileMax is the largest session file `context FILE` reads into
// memory at once; larger ones are read line by line (session.ReadSpans)
// and their window's bodies read back from the file, so that a file of
// any size costs its lines' metadata. Below it one read and bodies that
// alias it save a read and a copy per body.
const wholeFileMax = 32 << 20

// loadContextFile reads the session file of size bytes under the rule
// set mode: mapped whole when it is at most wholeFileMax, else line by
// line, its window's bodies read back from it. unmap releases the mapping
// once the bodies are written (a no-op when there is none); until then
// the source's bodies alias it.
func loadContextFile(file *os.File, size int64, mode session.RuleSet) (tree *session.Tree, src session.BodySource, unmap func(), err error) {
	if size > wholeFileMax || size == 0 {
		f, err := session.ReadSpans(file, size, mode)
		if err != nil {
			return nil, nil, nil, err
		}
		return f.Tree, f, func() {}, nil
	}
	// Mapped rather than read: no copy of the file, and its pages come
	// from the page cache a batch per fault instead of one fresh page of
	// heap at a time.
	data, err := unix.Mmap(int(file.Fd()), 0, int(size), unix.PROT_READ, unix.MAP_PRIVATE)
	if err != nil {
		data = make([]byte, size)
		if _, err := io.ReadFull(file, data); err != nil {
			return nil, nil, nil, err
		}
		unmap = func() {}
	} else {
		unix.Madvise(data, unix.MADV_WILLNEED) // read ahead: the scan takes it all, in order
		unmap = func() { unix.Munmap(data) }
	}
	f, err := session.LoadRules(data, mode)
	if err != nil {
		unmap()
		return nil, nil, nil, err
	}
	return f.Tree, f, unmap, nil
}

// widenPipe asks for a 1 MiB pipe when out is one (as when a program
// reads the context): with the default 64 KiB, writing a context of a few
// MB waits for the reader every 64 KiB. Best effort: a pipe stays as it is
// when the system refuses (fs.pipe-max-size).
func widenPipe(out io.Writer) {
	f, ok := out.(*os.File)
	if !ok {
		return
	}
	if st, err := f.Stat(); err == nil && st.Mode()&os.ModeNamedPipe != 0 {
		unix.FcntlInt(f.Fd(), unix.F_SETPIPE_SZ, 1<<20)
	}
}

// oneShotMemory is the Go soft limit of `context FILE` besides four
// times the file it holds: the runtime, the tree and the output buffer.
const oneShotMemory = 64 << 20

// contextSummary is what the human form shows of a context: the lines of
// its messages are short previews, so a context of any size fits.
type contextSummary struct {
	leaf            string
	entries         int
	model, thinking json.RawMessage
	rules           string // the set used; "" when the daemon did not say
	rulesMode       string // the set asked for
	lines           []string
}

// Flag texts and the valued flags (reorder) both context commands share.
const (
	contextJSONUsage  = `print {rules, rulesMode, leafId, contextEntryIds, messages, thinkingLevel, model}`
	contextRulesUsage = "the context rules: auto, seed or pi-1.6 (default: PISYNC_RULES, else auto; docs/RULES.md)"
)

var contextValued = []string{"leaf", "rules"}

// contextRules reads --rules; "" (not given) is RulesAuto, which the
// caller replaces by the configured set.
func contextRules(s string) (session.RuleSet, error) {
	if s == "" {
		return session.RulesAuto, nil
	}
	r, err := session.ParseRuleSet(s)
	if err != nil {
		return 0, &usageError{msg: fmt.Sprintf("context: --rules %q: want auto, seed or pi-1.6", s), usage: contextUsage}
	}
	return r, nil
}

// rulesNote is the human form's line about the rule set: the one used
// (rules) and the one asked for (mode), "" when the daemon did not say.
func rulesNote(rules, mode string) string {
	switch {
	case rules == "":
		return ""
	case mode != session.RulesAuto.String():
		return "rules " + rules + " (set by --rules or PISYNC_RULES)"
	case rules == session.RulesPi16.String():
		return "rules " + rules + " (auto-chosen: the session holds a line only pi >= 0.86 writes)"
	}
	return "rules " + rules + " (auto-chosen: no line only pi >= 0.86 writes)"
}

// add adds the preview line of a message.
func (s *contextSummary) add(m json.RawMessage) {
	var msg struct {
		Role    string          `json:"role"`
		Content json.RawMessage `json:"content"`
		Summary string          `json:"summary"`
		Command string          `json:"command"`
	}
	json.Unmarshal(m, &msg)
	text := msg.Summary + msg.Command
	if text == "" {
		text = contentText(msg.Content)
	}
	s.lines = append(s.lines, fmt.Sprintf("%3d %-18s %s", len(s.lines)+1, orDash(msg.Role), preview(text, 100)))
}

func (s *contextSummary) print(w io.Writer) error {
	fmt.Fprintf(w, "leaf %s, %d entries in the window, %d messages, model %s, thinking %s\n",
		orDash(s.leaf), s.entries, len(s.lines), orDash(modelName(s.model)), orDash(jsonText(s.thinking)))
	if note := rulesNote(s.rules, s.rulesMode); note != "" {
		fmt.Fprintln(w, note)
	}
	for _, l := range s.lines {
		if _, err := fmt.Fprintln(w, l); err != nil {
			return err
		}
	}
	return nil
}

// readContextSummary reads a context in the corpus shape (as the daemon
// sends it) one message at a time. Ids other than strings show as null.
func readContextSummary(r io.Reader) (*contextSummary, error) {
	dec := json.NewDecoder(r)
	s := &contextSummary{}
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return nil, fmt.Errorf("context: not a context (%v)", err)
	}
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return nil, fmt.Errorf("context: %w", err)
		}
		key, _ := t.(string)
		if key == "messages" || key == "contextEntryIds" {
			if t, err := dec.Token(); err != nil || t != json.Delim('[') {
				return nil, fmt.Errorf("context: %s: not an array (%v)", key, err)
			}
			for dec.More() {
				var m json.RawMessage
				if err := dec.Decode(&m); err != nil {
					return nil, fmt.Errorf("context: %w", err)
				}
				if key == "messages" {
					s.add(m)
				} else {
					s.entries++
				}
			}
			if _, err := dec.Token(); err != nil {
				return nil, fmt.Errorf("context: %w", err)
			}
			continue
		}
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return nil, fmt.Errorf("context: %w", err)
		}
		switch key {
		case "leafId":
			var id *string
			if json.Unmarshal(v, &id) == nil && id != nil {
				s.leaf = *id
			}
		case "thinkingLevel":
			s.thinking = v
		case "model":
			s.model = v
		case "rules":
			json.Unmarshal(v, &s.rules)
		case "rulesMode":
			json.Unmarshal(v, &s.rulesMode)
		}
	}
	return s, nil
}

// modelName is a context's model as people write it, provider/model,
// rather than the JSON object pi stores ({"provider", "modelId"}).
func modelName(raw json.RawMessage) string {
	var m struct {
		Provider string `json:"provider"`
		ModelID  string `json:"modelId"`
	}
	if json.Unmarshal(raw, &m) == nil && m.ModelID != "" {
		if m.Provider == "" {
			return m.ModelID
		}
		return m.Provider + "/" + m.ModelID
	}
	return jsonText(raw)
}

// jsonText is a JSON string's text, or the raw JSON of anything else.
func jsonText(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	return string(raw)
}

func contentText(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var blocks []struct {
		Type, Text, Thinking, Name string
	}
	json.Unmarshal(raw, &blocks)
	var parts []string
	for _, b := range blocks {
		switch b.Type {
		case "text":
			parts = append(parts, b.Text)
		case "thinking":
			parts = append(parts, "[thinking] "+b.Thinking)
		case "toolCall":
			parts = append(parts, "[tool "+b.Name+"]")
		case "image":
			parts = append(parts, "[image]")
		}
	}
	return strings.Join(parts, " ")
}

func preview(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if r := []rune(s); len(r) > n {
		return string(r[:n]) + "…"
	}
	return s
}

func orDash(s string) string {
	if s == "" || s == "null" {
		return "-"
	}
	return s
}
