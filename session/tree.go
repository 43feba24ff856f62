package session

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
)

// Ref is the caller's handle on an entry's bytes: a byte offset, a stream
// sequence, a line number. A Tree stores it and hands it back to a
// BodySource when a context needs the entry's body.
type Ref int64

// BodySource returns the raw line (one JSON value, no '\n') of the entry
// that was appended with ref.
type BodySource interface {
	Body(ref Ref) ([]byte, error)
}

var (
	// ErrNotSession means pi would refuse the file: the first kept value is
	// not a `type:"session"` object with a string id (spec §2).
	ErrNotSession = errors.New("session: not a valid pi session")
	// ErrEmptyFile means the file has no bytes at all. pi turns such a file
	// into a new session by writing a fresh header into it (random id,
	// current time); a reader cannot know those values, so it reports the
	// case instead. Callers treat it as "no session yet".
	ErrEmptyFile = errors.New("session: empty file")
	// ErrMigration means pi's load-time migration throws on the file (a
	// version-1 file holding a non-object value such as a number).
	ErrMigration = errors.New("session: migration fails")
	// ErrMissingMessage means a `message` entry on the path has no message
	// object; pi throws a TypeError while building the context.
	ErrMissingMessage = errors.New("session: message entry without message")
	// ErrUnknownEntry is returned for a leaf id that no entry has.
	ErrUnknownEntry = errors.New("no entry of the session has that id")
	// ErrCycle means the parentId chain from the leaf loops; pi itself
	// never returns from such a path. The error is a *CycleError.
	ErrCycle = errors.New("session: parentId cycle")

	errNotObject = errors.New("not a JSON object")
)

// CycleError names an entry on a parentId cycle. It matches ErrCycle.
type CycleError struct{ ID ID }

func (e *CycleError) Error() string {
	b, _ := e.ID.MarshalJSON()
	return fmt.Sprintf("session: parentId cycle through entry %s", b)
}

func (e *CycleError) Is(target error) bool { return target == ErrCycle }

// node is the metadata of one kept non-header value. It holds no bodies.
type node struct {
	ref    Ref
	id     ID
	parent ID
	typ    ID // the "type" field, usually a string
	ts     float64
	x      *extra // set for the entry types whose fields matter to the rules
	flags  uint8  // message facts the pi-1.6 rules read (flagSystem, flagEditable)
	size   uint32 // bytes of the line (saturated): lets a reader plan its reads of bodies
}

const (
	// flagSystem: a message entry whose message has role "system"; pi 1.6
	// leaves it out of a compaction's kept range.
	flagSystem uint8 = 1 << iota
	// flagEditable: the entry yields a message whose content a
	// context_edit replaces (role user, assistant, toolResult or custom;
	// for a compaction, its systemMessage).
	flagEditable
	// flagBadDate: pi's new Date(timestamp) throws: an array nested so
	// deep that joining it overflows the stack (see piJoinDepth), or an
	// object with an own toString (toPrimitiveThrows). Where pi converts
	// the timestamp, it throws.
	flagBadDate
)

// context_edit replacement kinds (extra.repl).
const (
	replValue  uint8 = iota // an object, or any other value (its content is undefined)
	replNull                // null: the target's messages are dropped
	replAbsent              // undefined: pi throws where it applies
)

// extra holds the small fields a few entry types contribute.
type extra struct {
	msgMissing bool // type message with message absent or null: pi throws
	assistant  bool
	provider   json.RawMessage // model_change provider / assistant message.provider
	model      json.RawMessage // model_change modelId / assistant message.model
	thinking   json.RawMessage // thinking_level_change thinkingLevel
	firstKept  ID              // compaction firstKeptEntryId
	tail       bool            // compaction retainedTail is an array
	target     ID              // label and context_edit targetId
	label      json.RawMessage // label label
	repl       uint8           // context_edit replacement kind
	name       json.RawMessage // session_info name
	fkIndex    float64         // v1 compaction firstKeptEntryIndex (NaN when not a number)
}

func (n *node) isType(t string) bool { return n.typ.kind == idString && n.typ.s == t }

// Tree is pi's in-memory session: entries in file order, the id index, the
// leaf, labels and the session name, plus the context window at the leaf,
// kept up to date as entries are appended. It stores metadata only.
//
// A Tree is not safe for concurrent use.
type Tree struct {
	state     int // 0: before the header, 1: loaded, 2: rejected
	rejectErr error
	header    json.RawMessage
	sessionID string
	version   float64 // header.version ?? 1, as a JS number (NaN: no migration)
	mode      RuleSet // chosen rule set (rules.go)
	newer     bool    // a line only pi >= 0.86 writes was seen

	nodes []node
	index map[ID]int32 // last entry per id (JS Map semantics)
	// missing holds parent ids that did not resolve when their child came;
	// their later arrival changes existing paths.
	missing map[ID]struct{}
	labels  map[ID]json.RawMessage
	nameIdx int32 // last session_info, -1 for none

	leafID  ID   // the last kept value's id
	hasLeaf bool // false: no entries (leaf null)

	// v1 migration state (spec §6): values seen so far including the
	// header, the node per parsed position, pending forward references.
	parsed    []int32
	v1Prev    ID
	v1Pending map[int]int32

	cur current
	// lastIndex is the Index last made at the leaf, which Index extends
	// while the window only grows (context.go).
	lastIndex lastIndex
	// heads is Heads(), kept by Append while headsOK.
	heads   []int
	headsOK bool
	// first is FirstMessage (firstmessage.go), set once.
	first string
	Stats
	noStats bool // Stats' usage totals are not kept (LoadOptions.NoStats)
}

// Stats are running totals over assistant messages, for a catalog.
type Stats struct {
	MessageCount int     // message entries
	TotalTokens  float64 // sum of assistant usage.totalTokens
	TotalCost    float64 // sum of assistant usage.cost.total
}

// NewTree returns an empty tree waiting for the header line.
func NewTree() *Tree {
	return &Tree{
		index:   make(map[ID]int32),
		missing: make(map[ID]struct{}),
		labels:  make(map[ID]json.RawMessage),
		nameIdx: -1,
		cur:     current{leaf: -1, valid: true, think: -1, model: -1, bad: -1},
		heads:   []int{},
		headsOK: true,
	}
}

// grow makes room for n more entries.
func (t *Tree) grow(n int) {
	t.nodes = slices.Grow(t.nodes, n)
	if len(t.index) == 0 {
		t.index = make(map[ID]int32, n)
	}
}

// SessionID is the header id.
func (t *Tree) SessionID() string { return t.sessionID }

// Header returns the header line as stored (before migration).
func (t *Tree) Header() json.RawMessage { return t.header }

// Len is the number of entries (kept non-header values).
func (t *Tree) Len() int { return len(t.nodes) }

// Migrated reports whether pi would migrate (and rewrite) this session on
// open: header version below 3 or missing.
func (t *Tree) Migrated() bool { return t.version < 3 }

func (t *Tree) v1() bool { return t.version < 2 }

// MigrationKeepsIDs reports whether pi's migration of this session keeps
// every entry's id: a version 2 header (2 up to 3), whose migration only
// renames hookMessage roles; a version 1 one gets new ids.
func (t *Tree) MigrationKeepsIDs() bool { return t.Migrated() && !t.v1() }

// Append adds one line of the file in order. Lines pi skips (blank,
// malformed, falsy) and further headers are accepted and ignored. It fails
// with ErrNotSession when the first kept value is not a valid header (and
// from then on), and with ErrMigration where pi's v1 migration throws.
func (t *Tree) Append(l Line, ref Ref) error {
	if !l.Kind.Kept() {
		return nil
	}
	if t.state == 2 {
		return t.rejectErr
	}
	if t.state == 0 {
		if l.Kind != Header || !l.HasID {
			t.state, t.rejectErr = 2, ErrNotSession
			return ErrNotSession
		}
		if err := t.setHeader(l); err != nil {
			return err
		}
		return t.checkRewrite(l)
	}
	if err := t.checkRewrite(l); err != nil {
		return err
	}
	pos := len(t.parsed)
	if l.Kind == Header {
		// Further headers are not entries (spec §3); they still count as
		// positions for v1 firstKeptEntryIndex.
		if t.v1() {
			t.parsed = append(t.parsed, -1)
		}
		return nil
	}
	var fields *lineFields
	parsed := l.f.ok // l came from ParseLine: its ID, ParentID and Type are decoded
	if l.Kind == Entry {
		fields = &l.f
		if !fields.ok {
			m, err := objectMap(l.Raw)
			if err != nil {
				return fmt.Errorf("session: decode entry: %w", err)
			}
			*fields = mapFields(m)
		}
	} else if t.v1() && trimWS(l.Raw)[0] != '[' {
		// pi assigns entry.id on every value; strict-mode JS throws for
		// primitives. Arrays are objects and survive.
		t.state, t.rejectErr = 2, fmt.Errorf("%w: non-object value in a version 1 file", ErrMigration)
		return t.rejectErr
	}
	n := node{ref: ref, ts: math.NaN(), size: uint32(min(uint64(len(l.Raw)), math.MaxUint32))}
	if fields != nil {
		n.id = lineID(parsed && l.HasID, l.ID, fields.id)
		n.parent = lineID(parsed && l.HasParent, l.ParentID, fields.parent)
		n.typ = lineID(parsed && l.Type != "", l.Type, fields.typ)
		n.ts = dateValue(fields.ts)
		if dateThrows(fields.ts) {
			n.flags |= flagBadDate
		}
		n.x = t.extraFor(&n, fields)
	}
	idx := int32(len(t.nodes))
	if t.v1() {
		t.parsed = append(t.parsed, idx)
		n.parent = t.v1Prev
		orig := n.id
		n.id = StringID(v1ID(t.sessionID, int(idx)))
		t.v1Prev = n.id
		if n.isType("compaction") && n.x != nil {
			if k := n.x.fkIndex; !math.IsNaN(k) {
				// entries[k] of the parsed values, header at 0; a later
				// target still has its old id when pi looks.
				switch ki := int(k); {
				case float64(ki) != k || ki <= 0:
				case ki < pos:
					if j := t.parsed[ki]; j >= 0 {
						n.x.firstKept = t.nodes[j].id
					}
				case ki == pos:
					n.x.firstKept = n.id
				default:
					t.v1Pending[ki] = idx
				}
			}
		}
		if c, ok := t.v1Pending[pos]; ok {
			t.nodes[c].x.firstKept = orig
			delete(t.v1Pending, pos)
		}
	}
	t.nodes = append(t.nodes, n)
	t.addNode(idx)
	return nil
}

// lineID is the ID of raw, or the string s ParseLine already decoded from
// it when decoded: not a second copy of it.
func lineID(decoded bool, s string, raw []byte) ID {
	if decoded {
		return StringID(s)
	}
	return idFromRaw(raw)
}

// piRewriteDepth is the deepest nesting pi's rewrite of a migrated file
// can write: it stringifies every value with JSON.stringify, which recurses
// and throws RangeError (Maximum call stack size exceeded) below a nesting
// that depends on node's stack; 4114 levels is what node 20 with its
// default stack manages in pi's open() (testdata/hostile).
const piRewriteDepth = 4114

// rewritten reports whether pi's open() writes the file back:
// migrateToCurrentVersion returns true unless version >= 3, so a version
// that is no number at all ({} or "x": NaN) rewrites the file too, even
// though it migrates nothing.
func (t *Tree) rewritten() bool { return !(t.version >= 3) }

// checkRewrite fails a file pi writes back (rewritten) with a value it
// cannot write: its open() throws, so the file does not load. Files pi
// does not rewrite load at any depth, as JSON.parse allows.
func (t *Tree) checkRewrite(l Line) error {
	if !t.rewritten() || t.rewriteDepth(l) <= piRewriteDepth {
		return nil
	}
	t.state, t.rejectErr = 2, fmt.Errorf("%w: a value nested deeper than %d levels cannot be written back", ErrMigration, piRewriteDepth)
	return t.rejectErr
}

// rewriteDepth is the nesting of a line as pi writes it back: the v1
// migration replaces an entry's id and parentId (and a numeric
// firstKeptEntryIndex's firstKeptEntryId) before it does, so whatever
// stood there does not count.
func (t *Tree) rewriteDepth(l Line) int {
	if !t.v1() || l.Kind != Entry {
		return nestingDepth(l.Raw)
	}
	fs, err := objectFields(l.Raw)
	if err != nil {
		return nestingDepth(l.Raw)
	}
	fk := l.Type == "compaction" && isNumberRaw(getField(fs, "firstKeptEntryIndex"))
	deepest := 1
	for _, f := range fs {
		if f.key == "id" || f.key == "parentId" || fk && f.key == "firstKeptEntryId" {
			continue
		}
		deepest = max(deepest, 1+nestingDepth(f.val))
	}
	return deepest
}

// nestingDepth is the deepest nesting of containers in a JSON text, as
// JSON.parse keeps it: a member that a later duplicate key replaces does
// not count (seed 37 file 336: a timestamp 20,000 levels deep, then
// "timestamp" again with a string). The plain count is exact for most
// lines; only one past piRewriteDepth is looked at member by member.
func nestingDepth(raw []byte) int {
	d := rawNestingDepth(raw)
	if d <= piRewriteDepth {
		return d
	}
	if k, _, err := keptDepth(raw, skipWS(raw, 0)); err == nil {
		return k
	}
	return d
}

// keptDepth is the nesting of the value at raw[i], the last of duplicate
// keys winning, and the offset past it; one pass, recursive.
func keptDepth(raw []byte, i int) (int, int, error) {
	switch {
	case i < len(raw) && raw[i] == '{':
		last := map[string]int{}
		e, err := scanMembers(raw, i, func(key []byte, at int) (int, error) {
			d, ve, err := keptDepth(raw, at)
			last[string(key)] = d
			return ve, err
		})
		deepest := 0
		for _, d := range last {
			deepest = max(deepest, d)
		}
		return 1 + deepest, e, err
	case i < len(raw) && raw[i] == '[':
		deepest := 0
		i = skipWS(raw, i+1)
		if i < len(raw) && raw[i] == ']' {
			return 1, i + 1, nil
		}
		for {
			d, e, err := keptDepth(raw, i)
			if err != nil {
				return 0, 0, err
			}
			deepest = max(deepest, d)
			i = skipWS(raw, e)
			if i >= len(raw) {
				return 0, 0, errSyntax
			}
			if raw[i] == ']' {
				return 1 + deepest, i + 1, nil
			}
			if raw[i] != ',' {
				return 0, 0, errSyntax
			}
			i = skipWS(raw, i+1)
		}
	}
	e, err := skipValue(raw, i)
	return 0, e, err
}

// rawNestingDepth is the deepest nesting of containers in a JSON text.
func rawNestingDepth(raw []byte) int {
	depth, deepest := 0, 0
	for i := 0; i < len(raw); i++ {
		switch raw[i] {
		case '{', '[':
			if depth++; depth > deepest {
				deepest = depth
			}
		case '}', ']':
			depth--
		case '"':
			e, _, err := skipString(raw, i)
			if err != nil {
				return deepest
			}
			i = e - 1
		}
	}
	return deepest
}

func (t *Tree) setHeader(l Line) error {
	t.state = 1
	t.header = own(l.Raw)
	t.sessionID = l.ID
	h, _ := objectMap(l.Raw)
	if v, ok := h["version"]; ok && !isAbsent(v) {
		if arrayChainDepth(v) > piJoinDepth {
			// `version >= 3` joins the array and overflows the stack
			t.state, t.rejectErr = 2, fmt.Errorf("%w: header version nested too deep to compare", ErrMigration)
			return t.rejectErr
		}
		if toPrimitiveThrows(v) {
			// `version >= 3` finds no callable toString: TypeError
			t.state, t.rejectErr = 2, fmt.Errorf("%w: header version cannot be compared (an own toString member)", ErrMigration)
			return t.rejectErr
		}
		t.version = jsToNumber(v)
	} else {
		t.version = 1
	}
	if t.v1() {
		t.parsed = []int32{-1}
		t.v1Prev = ID{kind: idNull}
		t.v1Pending = make(map[int]int32)
	}
	return nil
}

// v1ID derives the id pi would mint at random for the k-th entry of a
// version-1 file. Deterministic, so every replay of the file agrees. The
// session id is hashed as node encodes it in UTF-8 (a lone surrogate as
// U+FFFD), which is what the oracle harness feeds pi (testdata/pi-eval).
func v1ID(sessionID string, k int) string {
	h := sha256.Sum256([]byte(utf8Safe(sessionID) + "\x00" + strconv.Itoa(k)))
	return hex.EncodeToString(h[:4])
}

// extraFor extracts what the rules need from the types that have any.
func (t *Tree) extraFor(n *node, f *lineFields) *extra {
	if n.typ.kind != idString {
		return nil
	}
	switch n.typ.s {
	case "message":
		t.MessageCount++
		m := f.message
		if isAbsent(m) {
			return &extra{msgMissing: true}
		}
		if !isObject(m) {
			return nil
		}
		msg := f.msg
		if !msg.ok {
			mm, err := objectMap(m)
			if err != nil {
				return nil
			}
			msg = msgFields{ok: true, role: mm["role"], usage: mm["usage"], provider: mm["provider"], model: mm["model"]}
		}
		r, _ := rawString(msg.role)
		if r == "hookMessage" && t.version < 3 {
			r = "custom" // the v2 → v3 migration's rename
		}
		if editableRole(r) {
			n.flags |= flagEditable
		}
		if r == "user" && t.first == "" {
			t.noteFirst(m)
		}
		if r == "system" {
			n.flags |= flagSystem
			t.markNewer()
		}
		if r != "assistant" {
			return nil
		}
		if !t.noStats {
			t.Stats.addUsage(msg.usage)
		}
		return &extra{assistant: true, provider: own(msg.provider), model: own(msg.model)}
	case "custom_message":
		n.flags |= flagEditable
		return nil
	case "context_edit":
		t.markNewer()
		x := &extra{target: idFromRaw(f.targetID)}
		switch r := f.replacement; {
		case r == nil:
			x.repl = replAbsent
		case isAbsent(r):
			x.repl = replNull
		}
		return x
	case "usage":
		t.markNewer()
		return nil
	case "model_change":
		return &extra{provider: own(f.provider), model: own(f.modelID)}
	case "thinking_level_change":
		return &extra{thinking: own(f.thinking)}
	case "compaction":
		x := &extra{firstKept: idFromRaw(f.firstKept), tail: isArray(f.retainedTail), fkIndex: math.NaN()}
		if sys := f.systemMsg; truthy(sys) {
			t.markNewer()
			if isObject(sys) {
				if m, err := objectMap(sys); err == nil {
					if r, _ := rawString(m["role"]); editableRole(r) {
						n.flags |= flagEditable
					}
				}
			}
		}
		if raw := trimWS(f.fkIndex); len(raw) > 0 && (raw[0] == '-' || raw[0] >= '0' && raw[0] <= '9') {
			x.fkIndex, _ = strconv.ParseFloat(string(raw), 64)
		}
		return x
	case "label":
		return &extra{target: idFromRaw(f.targetID), label: own(f.label)}
	case "session_info":
		return &extra{name: own(f.name)}
	}
	return nil
}

// own copies a value the tree keeps out of its line, so that the tree
// does not hold the line (an assistant message's whole body, for its
// model) once the caller lets it go.
func own(raw json.RawMessage) json.RawMessage { return bytes.Clone(raw) }

// editableRole reports whether a context_edit replaces the content of a
// message with this role (pi 1.6's projectContextEntry).
func editableRole(role string) bool {
	switch role {
	case "user", "assistant", "toolResult", "custom":
		return true
	}
	return false
}

// addUsage adds an assistant message's usage to the running totals
// (keys matched exactly, as JavaScript does; encoding/json would fold case).
func (t *Stats) addUsage(raw json.RawMessage) {
	// One pass over usage and its cost (no maps): the last of duplicate
	// keys wins, as objectMap's would.
	var tokens, cost []byte
	if !isObject(raw) || eachMember(raw, func(k, v []byte) {
		switch string(k) {
		case "totalTokens":
			tokens = v
		case "cost":
			cost = v
		}
	}) != nil {
		return
	}
	if f, err := strconv.ParseFloat(string(trimWS(tokens)), 64); err == nil {
		t.TotalTokens += f
	}
	var total []byte
	if isObject(cost) && eachMember(cost, func(k, v []byte) {
		if string(k) == "total" {
			total = v
		}
	}) == nil {
		if f, err := strconv.ParseFloat(string(trimWS(total)), 64); err == nil {
			t.TotalCost += f
		}
	}
}

// addNode indexes node idx as pi's _buildIndex does and moves the leaf.
func (t *Tree) addNode(idx int32) {
	n := &t.nodes[idx]
	disturbs := false
	if n.id.mapKey() {
		if _, dup := t.index[n.id]; dup {
			disturbs = true // paths through the old entry now go through this one
		}
		if _, was := t.missing[n.id]; was {
			disturbs = true // orphans waiting for this id are attached now
			delete(t.missing, n.id)
		}
		t.index[n.id] = idx
	}
	parent := int32(-1)
	if n.parent.truthy() {
		if p, ok := t.index[n.parent]; ok && n.parent.mapKey() {
			parent = p
		} else if n.parent.mapKey() {
			t.missing[n.parent] = struct{}{}
		}
	}
	if n.isType("label") && n.x != nil {
		if !n.x.target.mapKey() {
			// an object target is a key nothing can look up again
		} else if truthy(n.x.label) {
			t.labels[n.x.target] = n.x.label
		} else {
			delete(t.labels, n.x.target)
		}
	}
	if n.isType("session_info") {
		t.nameIdx = idx
	}
	t.leafID, t.hasLeaf = n.id, true
	t.advance(idx, parent, disturbs)
	t.updateHeads(idx, parent, disturbs)
}
