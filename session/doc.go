// Package session reads pi coding-agent session files (JSONL) and reproduces
// what pi makes of them: the entry tree, the leaf, load-time migrations, the
// LLM context (buildContextEntries / buildSessionContext / convertToLlm) and
// the session-list summary. The contract is the rule set `seed` of
// shared/spec/pi-sessions.md: pi 0.85.1 plus the compaction retainedTail rules.
//
// The package is pure: no files beyond an io.Reader, no clocks, no I/O of its
// own. Two ways in share one code path:
//
//   - Read/Load parse a whole file into a File, which owns the raw lines.
//   - Tree accepts lines one at a time (Append) and keeps only metadata
//     (ids, parents, types, timestamps and a caller-chosen Ref per entry), so
//     its memory does not grow with message bodies. Bodies are fetched through
//     a BodySource only when a context is built; Tree.Index names the ones a
//     context needs without reading any. A File is a Tree whose BodySource
//     is the file itself.
//
// Rendering scans each body once (scan.go) and passes stored messages on
// as their raw bytes, so a context costs about one pass over its bodies.
//
// pi is JavaScript, and its rules lean on JavaScript semantics (truthiness,
// Map keys, Date.parse, V8's sort); the helpers in js*.go reproduce exactly
// the parts that decide results. Where pi would loop forever (a parentId
// cycle) this package returns ErrCycle instead.
package session
