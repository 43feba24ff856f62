package web

import (
	"bytes"
	"errors"
	"strings"

	"github.com/yuin/goldmark/ast"
	"github.com/yuin/goldmark/parser"
	"github.com/yuin/goldmark/text"
)

// The bounds on what one text may cost as markdown. A session line is
// written by whoever shares the team, and its text is rendered on every
// request and for every open tab: a text past any bound is shown as
// escaped preformatted text instead, which costs its length.
//
// goldmark's worst cases are quadratic in a paragraph's delimiters and
// link brackets and in a line's nesting, and a table pads each row to
// its header's width: measured at 32 KiB before these bounds, 0.4-0.6 s
// for delimiter runs, open links and 32k-deep quotes, 3.6 s and 13 MB of
// HTML for a 1000-column table (docs/SECURITY.md has the numbers).
const (
	// maxMarkdown bounds the text rendered as markdown.
	maxMarkdown = 32 << 10
	// maxMarks bounds the inline markup characters (emphasis, links,
	// code, raw HTML) in one run of lines between blank lines: each may
	// start a scan of the rest of its paragraph.
	maxMarks = 2048
	// maxNest bounds the block quote and list markers that open one line.
	maxNest = 32
	// maxTableCols and maxTableCells bound tables, summed over the text.
	maxTableCols  = 64
	maxTableCells = 4096
)

// maxHTML is the most HTML a text of n bytes may render to: a few times
// its length (escaping alone makes a quote six bytes), and some room.
func maxHTML(n int) int { return 8*n + 4096 }

// costlyMarkdown reports whether src has more inline markup in one run of
// lines, or deeper nesting on one line, than the bounds allow. It looks
// at the text as lines, not as markdown: it can only say yes too often.
func costlyMarkdown(src string) bool {
	marks := 0
	for line := range strings.Lines(src) {
		if strings.TrimSpace(line) == "" {
			marks = 0
			continue
		}
		marks += strings.Count(line, "*") + strings.Count(line, "_") + strings.Count(line, "~") +
			strings.Count(line, "[") + strings.Count(line, "<") + strings.Count(line, "`")
		if marks > maxMarks || nesting(line) > maxNest {
			return true
		}
	}
	return false
}

// nesting counts the block quote and list markers a line opens with.
func nesting(line string) int {
	n := 0
	for i := 0; i < len(line); {
		switch c := line[i]; {
		case c == ' ' || c == '\t':
			i++
		case c == '>':
			n++
			i++
		case (c == '-' || c == '*' || c == '+') && i+1 < len(line) && (line[i+1] == ' ' || line[i+1] == '\t'):
			n++
			i += 2
		case c >= '0' && c <= '9':
			j := i
			for j < len(line) && j-i < 9 && line[j] >= '0' && line[j] <= '9' {
				j++
			}
			if j+1 < len(line) && (line[j] == '.' || line[j] == ')') && (line[j+1] == ' ' || line[j+1] == '\t') {
				n++
				i = j + 2
				continue
			}
			return n
		default:
			return n
		}
	}
	return n
}

// tableGuard runs on each paragraph before goldmark's table transformer
// (priority 200) and counts the cells the tables in it would have, the
// padding included. Past a bound it marks the parse as too costly and
// empties the paragraph, so that no table is built from it: the render
// then shows the whole text preformatted.
//
// It reads the paragraph's lines as the parser holds them, inside block
// quotes and list items too, where a scan of the text would not see a
// table.
type tableGuard struct{}

var tableCellsKey = parser.NewContextKey()

func (tableGuard) Transform(p *ast.Paragraph, reader text.Reader, pc parser.Context) {
	lines := p.Lines()
	src := reader.Source()
	cells, _ := pc.Get(tableCellsKey).(int)
	for i := 1; i < lines.Len(); i++ {
		seg := lines.At(i)
		cols := tableCols(seg.Value(src))
		if cols == 0 {
			continue
		}
		cells += cols * (lines.Len() - i) // the header and every row after
		if cols > maxTableCols || cells > maxTableCells {
			pc.Set(tableCellsKey, maxTableCells+1)
			p.Parent().RemoveChild(p.Parent(), p)
			return
		}
	}
	pc.Set(tableCellsKey, cells)
}

// tableCols is the number of columns of a table delimiter row as
// goldmark reads one (pipes, dashes, colons and spaces), 0 if line is
// not one. It takes some lines goldmark would not: it may count too many.
func tableCols(line []byte) int {
	dash := false
	for _, c := range line {
		switch c {
		case '-':
			dash = true
		case '|', ':', ' ', '\t', '\r', '\n', '\v', '\f':
		default:
			return 0
		}
	}
	if !dash {
		return 0
	}
	cols := bytes.Split(line, []byte{'|'})
	if len(bytes.TrimSpace(cols[0])) == 0 {
		cols = cols[1:]
	}
	if len(cols) > 0 && len(bytes.TrimSpace(cols[len(cols)-1])) == 0 {
		cols = cols[:len(cols)-1]
	}
	return len(cols)
}

func tooManyCells(pc parser.Context) bool {
	n, _ := pc.Get(tableCellsKey).(int)
	return n > maxTableCells
}

// errHTMLCap is returned by capWriter past its cap.
var errHTMLCap = errors.New("web: markdown: rendered HTML over its cap")

// capWriter appends to a buffer until a cap, then fails every write:
// goldmark's renderer keeps the first write error and stops writing.
type capWriter struct {
	b    *bytes.Buffer
	left int
}

func (w *capWriter) Write(p []byte) (int, error) {
	if len(p) > w.left {
		w.left = 0
		return 0, errHTMLCap
	}
	w.left -= len(p)
	return w.b.Write(p)
}
