// Package search keeps a full-text index of every session known here:
// user and assistant text, tool calls (name and arguments), tool results,
// bash executions (command and output), custom messages, compaction and
// branch summaries, labels, session names and each session's cwd. One
// document per entry (Doc), fields: session id, origin node, entry id,
// entry type, message role, timestamp, text.
//
// The index is derived data like the projections (package projection): a
// Worker consumes PI_LOCAL and, with a hub, PI_ALL (the plaintext copy the
// downloader stores after opening sealed lines), indexes each line as it
// comes, and saves its read position per stream inside the index, in the
// same batch as the documents, so a restart resumes exactly where the index
// is. An index that is missing, unreadable or of another format is removed
// and rebuilt from the streams. An erase event removes every document of
// its session.
//
// Thinking blocks are not indexed: they are the model's scratch work, often
// larger than everything else in a message, pi's own views collapse them,
// and a hit inside them would point at text the reader does not see.
//
// The index is bleve (scorch on disk) in STATE_DIR/search: pure Go, bounded
// memory (batches are bounded in bytes, segments live on disk, and the
// pages of their memory-mapped files are kept out of the resident set:
// resident.go), a tested
// tokenizer and scorer. docs/PERFORMANCE.md ("Search") has the comparison
// with a small index of our own, and the numbers.
//
// Queries are parsed here (query.go), not by bleve's query-string syntax:
// words (all must match), "quoted phrases", -excluded words and the
// filters session:, node:, type:, role:. A search whose phrases take longer
// than PhraseBudget to match in order is answered with each phrase as its
// words, and says so (Result.Approximate). No regular expressions, wildcards
// or fuzzy terms: a local client is untrusted and those expand to any
// number of terms.
package search
