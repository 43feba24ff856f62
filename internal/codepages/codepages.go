// Package codepages lets go of the pages of the program's own file that
// it holds mapped: its code and read-only data.
//
// A Go daemon maps its whole executable, and the kernel maps the pages
// around each one the program touches (fault-around, 64 KiB), so after a
// start most of the code and read-only data of a 49 MB binary counts in
// the resident set (30 MB of pisyncd's: docs/PERFORMANCE.md) though an
// idle daemon runs a small part of it. Those pages are the file's, never
// written: the process can drop its mappings of them at any time, and
// the next use of one maps it again from the page cache (or reads it from
// the file). The kernel itself evicts such pages whenever memory is short,
// so a program never relied on keeping them: dropping them adds no way to
// fail that was not there. (A mapping that was written, a
// position-independent build's relocated data, is left alone: Drop.)
package codepages
