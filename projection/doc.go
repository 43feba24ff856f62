// Package projection keeps event-sourced views of every session in the KV
// bucket pi_proj: a catalog entry, the leaf, the heads (tips of the tree)
// and the LLM-context index. It consumes PI_LOCAL (this node's subjects) and,
// on a workstation with a hub, PI_ALL (other nodes' subjects only: this
// node's own lines come back through the hub and are already in PI_LOCAL).
//
// Design, in the order a reader needs it:
//
//   - Every session is one session.Tree fed in arrival order; the tree
//     holds metadata only and its Refs name stream positions (ref.go), so
//     bodies are read back from the stream when a full context is asked for,
//     a read-ahead at a time as the context is written (bodies.go), so a
//     query's memory does not grow with the context. The bodies of a
//     session's last context window stay in memory, within a byte budget
//     for the whole worker, so a repeated query reads only what is new
//     (bodycache.go).
//   - Each value written carries the stream sequences it was built from
//     (Src). A session remembers the last sequence applied per stream and
//     skips anything at or below it, so redeliveries and replays change
//     nothing.
//   - The worker saves its read position per stream (key pos.<stream>) after
//     the views of everything up to it are written. A restart resumes after
//     it: when nothing changed, nothing is applied. Trees are not persisted;
//     a session's tree is rebuilt from the stream lazily, the first time an
//     event or a context query needs it after a restart or an eviction
//     (trees are kept in a bounded LRU). The catalog, which carries the
//     per-stream sequences, is loaded into memory at start through one KV
//     watch and serves Catalog() without touching KV again.
//   - No message text is written to the bucket: an erase purges a
//     session's keys, but purged and superseded values' bytes stay in the
//     bucket stream's blocks. The catalog's first message is held in memory
//     only, and read back from each session's stream in the background
//     after a start (firstmessage.go).
//   - The context index is paged (ctx.<n> keys, 2048 window entries a page),
//     so no value comes near NATS's 1 MiB limit whatever the session size,
//     and an append rewrites only the pages that changed.
//
// One goroutine per stream applies events; sessions are guarded by their
// own mutex because queries (Context) read the same tree; a query holds it
// only while it takes the context's index.
package projection
