// Package web serves the daemon's web view: every session known here (this
// machine's and the replicas of other machines'), each as a tree with its
// selected branch rendered, the context the model sees, and live updates
// over Server-Sent Events, which are also a documented API for subscribers
// (docs/SUBSCRIBING.md).
//
// It owns presentation only. What a session holds, its tree, leaf and
// context follow pi's rules in session/ and projection/; this package reads
// them through Source (satisfied by *projection.Worker) and turns them into
// HTML and JSON.
//
// Session text is written by whoever wrote into a session (a web page an
// agent read, a file it opened): every byte of it is escaped, markdown is
// rendered with raw HTML off and dangerous URLs dropped, a text whose
// markdown would cost much more than its length is shown preformatted
// (mdbounds.go), and the pages run
// under a strict Content-Security-Policy with no inline script or style
// (security.go). Every asset is embedded: the view works offline.
package web
