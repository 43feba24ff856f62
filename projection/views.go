package projection

import (
	"encoding/json"
)

// Src names the stream positions a value was built from: for each stream,
// the sequence of the last event of the session applied.
type Src map[string]uint64

// CatalogEntry is one session in the catalog (key s.<tok>.cat).
type CatalogEntry struct {
	SessionID string          `json:"sessionId"`
	Name      string          `json:"name,omitempty"`
	Cwd       string          `json:"cwd,omitempty"`
	Nodes     []string        `json:"nodes"`          // origin nodes, sorted
	File      string          `json:"file,omitempty"` // file of the last line applied, relative to its node's sessions root
	Files     NodeFiles       `json:"files,omitempty"`
	Entries   int             `json:"entries"`  // kept entries (header excluded)
	Messages  int             `json:"messages"` // message entries
	Created   string          `json:"created,omitempty"`
	Updated   string          `json:"updated,omitempty"` // newest entry timestamp, else created
	UpdatedMs float64         `json:"updatedMs,omitempty"`
	LeafID    json.RawMessage `json:"leafId,omitempty"`
	Model     json.RawMessage `json:"model,omitempty"`
	Thinking  json.RawMessage `json:"thinkingLevel,omitempty"`
	Tokens    float64         `json:"totalTokens"`
	// Rules is the rule set the context view was computed with (seed or
	// pi-1.6; docs/RULES.md).
	Rules     string   `json:"rules,omitempty"`
	Cost      float64  `json:"totalCost"`
	Deleted   bool     `json:"deleted,omitempty"`
	DeletedOn []string `json:"deletedOn,omitempty"` // nodes whose file was deleted
	Error     string   `json:"error,omitempty"`     // why pi would not load it
	// Collisions lists entry ids two different lines claim (at most
	// maxCollisions), with the nodes that published them, first first.
	Collisions []Collision `json:"collisions,omitempty"`
	// MigratedBy is the node whose pi migrated this old (version 1 or 2)
	// session first; MigrationLosers migrated it again later, and their
	// lines are left out of the views (the first migration wins, as in
	// the files: see replicate/migrate.go).
	MigratedBy      string   `json:"migratedBy,omitempty"`
	MigrationLosers []string `json:"migrationLosers,omitempty"`
	Src             Applied  `json:"src"`
	// CtxPages is how many context pages are written, so pages past a
	// shrunken window are dropped even after a restart.
	CtxPages int `json:"ctxPages"`

	// FirstMessage is the text of the first user message with text, in
	// the order the lines were applied, as pi's session list shows it
	// (spec §9), cut to session.FirstMessageMax bytes at a rune boundary;
	// "" when there is none (pi shows "(no messages)"), or when it is not
	// read yet. It is kept in the worker's memory only, never written to
	// the bucket (firstmessage.go): ReadCatalog has none.
	FirstMessage string `json:"firstMessage,omitempty"`
	// ParentSession is the header's parentSession when it is a string:
	// the path of the file this session was forked, cloned or branched
	// from, on the machine that did it. Forked says it is there.
	ParentSession string `json:"parentSession,omitempty"`
	Forked        bool   `json:"forked,omitempty"`
}

// Collision is an entry id claimed by two different lines.
type Collision struct {
	ID    string    `json:"id"`
	Nodes [2]string `json:"nodes"`
}

// maxCollisions bounds the collisions a catalog entry lists.
const maxCollisions = 8

// LeafView is a session's leaf (key s.<tok>.leaf): the entry pi would take
// as leaf if it opened this machine's copy now.
type LeafView struct {
	LeafID json.RawMessage `json:"leafId"`
	Type   string          `json:"type,omitempty"`
	Ref    string          `json:"ref,omitempty"` // where its line is: "L:<seq>" or "A:<seq>"
	Src    Src             `json:"src"`
}

// HeadsView lists the tips of a session's tree (key s.<tok>.heads).
type HeadsView struct {
	Heads     []Head `json:"heads"`
	Truncated bool   `json:"truncated,omitempty"` // more than maxHeads tips: the newest are kept
	Total     int    `json:"total"`
	Src       Src    `json:"src"`
}

// Head is one tip of the tree.
type Head struct {
	ID  json.RawMessage `json:"id"`
	Ref string          `json:"ref"`
}

// ContextView is the head of a session's context index (key s.<tok>.ctx):
// the settings at the leaf and how many pages hold the window.
type ContextView struct {
	LeafID   json.RawMessage `json:"leafId"`
	Thinking json.RawMessage `json:"thinkingLevel,omitempty"`
	Model    json.RawMessage `json:"model"`
	Entries  int             `json:"entries"` // window entries (contextEntryIds)
	Refs     int             `json:"refs"`    // entries that can yield messages
	Pages    int             `json:"pages"`
	PageSize int             `json:"pageSize"`
	Error    string          `json:"error,omitempty"`
	// Rules is the rule set the window was computed with: seed or pi-1.6
	// (with PISYNC_RULES=auto, pi-1.6 once the session holds a line only
	// pi >= 0.86 writes; docs/RULES.md).
	Rules string `json:"rules"`
	Src   Src    `json:"src"`
}

// ContextPage is page n of the index (key s.<tok>.ctx.<n>): window entry ids
// [n*PageSize, (n+1)*PageSize) and, over the same range of positions, the
// refs of the window entries that can yield messages (message,
// custom_message, branch_summary, compaction), in window order, with a
// context_edit's ref after the entry it changes: refs and ids are not
// index for index. A message's body is one direct get away by its ref.
type ContextPage struct {
	Page      int               `json:"page"`
	IDs       []json.RawMessage `json:"ids"`
	Refs      []string          `json:"refs"`
	Truncated bool              `json:"truncated,omitempty"` // ids cut to keep the value under maxValue
	Src       Src               `json:"src"`
}

// pageSize is the number of index positions a page holds; maxValue bounds
// every value written (NATS max_payload is 1 MiB).
const (
	pageSize = 2048
	maxValue = 900 << 10
	maxHeads = 1000
)
