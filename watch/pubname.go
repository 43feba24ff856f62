package watch

import (
	"strings"

	"github.com/pisyncd/pisyncd/admit"
)

// publishedFile is the name a file's lines carry (Pi-File): its path
// relative to the sessions root where the other machines take it
// (admit.ValidFile), else that path with what they refuse replaced by
// '_': bytes that are not UTF-8, control characters, '\' and a leading
// '.'. A session whose file name was not UTF-8 was refused whole on every
// machine, its own included (a probe, 2026-12-07), though only the name
// was at fault; the name only tells the other machines which folder to
// write their copy in, and they name the copy after the session.
func publishedFile(rel string) string {
	if admit.ValidFile(rel) == nil {
		return rel
	}
	names := strings.Split(rel, "/")
	for i, n := range names {
		n = strings.Map(func(r rune) rune {
			if r == '\\' || r < 0x20 || r == 0x7f || (r >= 0x80 && r < 0xa0) {
				return '_'
			}
			return r
		}, strings.ToValidUTF8(n, "_"))
		if strings.HasPrefix(n, ".") {
			n = "_" + n[1:]
		}
		names[i] = n
	}
	return strings.Join(names, "/")
}
