package web

import (
	"encoding/json"
	"math"
	"net/http"
	"runtime"
	"sort"
	"sync"

	"github.com/pisyncd/pisyncd/projection"
	"github.com/pisyncd/pisyncd/session"
)

// The tree panel and the tokens by model need a line of every entry of
// the session, the branch only its last page: they are a request of their
// own (/api/s/<id>/tree), so the page draws the branch without waiting
// for them. Both requests start as the page loads (its Link header) and
// share one read of the session (snapshot in api.go).

// treeView is the tree panel's data.
type treeView struct {
	Leaf  string       `json:"leaf"`
	Pos   string       `json:"pos"` // the snapshot the rows were read from
	Tree  []treeRow    `json:"tree"`
	Usage []modelUsage `json:"usage"`
}

func (s *Server) serveTree(w http.ResponseWriter, r *http.Request) {
	sid := r.PathValue("sid")
	tm := newTimings()
	snap, ok := s.snapshot(w, r, sid, s.catalogEntry(r.Context(), sid))
	if !ok {
		return
	}
	tm.mark("snapshot")
	v := treeView{Leaf: idText(snap.Tree.Leaf()), Pos: formatPos(snap.Src)}
	v.Tree, v.Usage = s.treeAndUsage(sid, snap)
	tm.mark("tree")
	tm.writeJSON(w, v)
}

// lean is the part of an entry the tree and the usage read: decoding only
// these fields (and no content block's data or thinking) is a third of a
// full decode, for every entry of the session.
type lean struct {
	Type          string       `json:"type"`
	Message       *leanMessage `json:"message"`
	Summary       any          `json:"summary"`
	ModelID       any          `json:"modelId"`
	ThinkingLevel any          `json:"thinkingLevel"`
	Label         any          `json:"label"`
	TargetID      any          `json:"targetId"`
	Name          any          `json:"name"`
	CustomType    any          `json:"customType"`
}

type leanMessage struct {
	Role     any             `json:"role"`
	Content  json.RawMessage `json:"content"`
	Command  any             `json:"command"`
	ToolName any             `json:"toolName"`
	Provider any             `json:"provider"`
	Model    any             `json:"model"`
	Usage    json.RawMessage `json:"usage"`
}

type leanBlock struct {
	Type string `json:"type"`
	Text any    `json:"text"`
	Name any    `json:"name"`
}

// parseLean decodes an entry as parseDoc does (a field of an unexpected
// type keeps only the type), with the fields of lean.
func parseLean(raw []byte) (*lean, error) {
	var d lean
	if err := json.Unmarshal(raw, &d); err != nil {
		var m map[string]any
		if err2 := json.Unmarshal(raw, &m); err2 != nil {
			return nil, err
		}
		d = lean{Type: str(m["type"])}
	}
	return &d, nil
}

// summarize is an entry's kind (its role for a message) and a line of its
// text.
func summarize(d *lean) (kind, text string) {
	switch d.Type {
	case "message":
		if d.Message == nil {
			return "message", ""
		}
		role := clipLine(display(d.Message.Role))
		switch role {
		case "bashExecution":
			return role, clipLine(display(d.Message.Command))
		case "toolResult":
			return role, clipLine(display(d.Message.ToolName))
		}
		blocks, text := contentBlocks[leanBlock](d.Message.Content)
		for _, b := range blocks {
			switch b.Type {
			case "text":
				if text == "" {
					text = display(b.Text)
				}
			case "toolCall":
				if text == "" {
					text = "→ " + display(b.Name)
				}
			}
		}
		return role, snippet(text)
	case "compaction", "branch_summary":
		return d.Type, snippet(display(d.Summary))
	case "model_change":
		return d.Type, clipLine(display(d.ModelID))
	case "thinking_level_change":
		return d.Type, clipLine(display(d.ThinkingLevel))
	case "label":
		return d.Type, clipLine(display(d.Label))
	case "session_info":
		return d.Type, clipLine(display(d.Name))
	case "custom", "custom_message":
		return d.Type, clipLine(display(d.CustomType))
	}
	return d.Type, ""
}

// entryLine is what the tree and the usage take from one entry.
type entryLine struct {
	kind, text string
	// model is provider/model of an assistant message ("" otherwise),
	// with its tokens and cost.
	model        string
	tokens, cost float64
}

// lines reads every entry of snap, split among the CPUs: each entry is
// decoded on its own.
func lines(snap *projection.Snapshot) []entryLine {
	n := snap.Tree.Len()
	out := make([]entryLine, n)
	workers := min(runtime.GOMAXPROCS(0), max(1, n/512))
	var wg sync.WaitGroup
	for k := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := k * n / workers; i < (k+1)*n/workers; i++ {
				out[i] = lineOf(snap, i)
			}
		}()
	}
	wg.Wait()
	return out
}

func lineOf(snap *projection.Snapshot, i int) entryLine {
	e := snap.Tree.Entry(i)
	var d *lean
	if raw, ok := snap.Line(e.Ref); ok {
		d, _ = parseLean(raw)
	}
	if d == nil {
		if t, ok := e.Type.String(); ok {
			return entryLine{kind: t}
		}
		return entryLine{kind: "other"}
	}
	var l entryLine
	l.kind, l.text = summarize(d)
	if d.Message == nil || display(d.Message.Role) != "assistant" {
		return l
	}
	l.model = modelName(display(d.Message.Provider), display(d.Message.Model))
	var us struct {
		Total any `json:"totalTokens"`
		Cost  struct {
			Total any `json:"total"`
		} `json:"cost"`
	}
	json.Unmarshal(d.Message.Usage, &us)
	l.tokens, _ = us.Total.(float64)
	l.cost, _ = us.Cost.Total.(float64)
	return l
}

// tree lists the entries in pi's tree order (getTree: children by time),
// indenting only below a node with more than one child.
func tree(snap *projection.Snapshot, ls []entryLine) []treeRow {
	roots, err := snap.Tree.GetTree()
	if err != nil {
		return []treeRow{}
	}
	labels := labelsOf(snap)
	rows := make([]treeRow, 0, snap.Tree.Len())
	type item struct {
		n      *session.TreeNode
		depth  int
		parent string
	}
	stack := make([]item, 0, len(roots))
	for k := len(roots) - 1; k >= 0; k-- {
		stack = append(stack, item{roots[k], 0, ""})
	}
	seen := make([]bool, snap.Tree.Len())
	for len(stack) > 0 {
		it := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		if seen[it.n.Entry] {
			continue // a duplicated id's node appears more than once
		}
		seen[it.n.Entry] = true
		info := snap.Tree.Entry(it.n.Entry)
		row := treeRow{ID: idText(info.ID), Parent: it.parent, Depth: it.depth, Time: info.Timestamp}
		if math.IsNaN(row.Time) {
			row.Time = 0
		}
		row.Type, row.Text = ls[it.n.Entry].kind, ls[it.n.Entry].text
		row.Label = labels[row.ID]
		rows = append(rows, row)
		d := it.depth
		if len(it.n.Children) > 1 {
			d++
		}
		for k := len(it.n.Children) - 1; k >= 0; k-- {
			stack = append(stack, item{it.n.Children[k], d, row.ID})
		}
	}
	return rows
}

// modelName is provider/model as the usage table shows it.
func modelName(provider, model string) string {
	switch provider, model = clipLine(provider), clipLine(model); {
	case provider == "" && model == "":
		return "(no model)"
	case provider == "":
		return model
	case model == "":
		return provider
	}
	return provider + "/" + model
}

// usage sums assistant usage per model over every entry of the session.
func usage(ls []entryLine) []modelUsage {
	by := map[string]*modelUsage{}
	for _, l := range ls {
		if l.model == "" {
			continue
		}
		u := by[l.model]
		if u == nil {
			u = &modelUsage{Model: l.model}
			by[l.model] = u
		}
		u.Count++
		u.Tokens += l.tokens
		u.Cost += l.cost
	}
	out := make([]modelUsage, 0, len(by))
	for _, u := range by {
		out = append(out, *u)
	}
	sort.Slice(out, func(a, b int) bool { return out[a].Tokens > out[b].Tokens })
	return out
}
