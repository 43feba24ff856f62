package watch

import (
	"testing"

	"github.com/pisyncd/pisyncd/admit"
)

// TestPublishedFile: a name the other machines take is published as it
// is; one they refuse (not UTF-8, a control character, '\', a leading
// '.') is published with those replaced, a name they take.
func TestPublishedFile(t *testing.T) {
	for in, want := range map[string]string{
		"--work--/2026_a.jsonl":       "--work--/2026_a.jsonl",
		"--work--/bad\xffname.jsonl":  "--work--/bad_name.jsonl",
		"--w\xc3--/x.jsonl":           "--w_--/x.jsonl",
		"--work--/new\nline.jsonl":    "--work--/new_line.jsonl",
		"--work--/back\\slash.jsonl":  "--work--/back_slash.jsonl",
		"--work--/.hidden.jsonl":      "--work--/_hidden.jsonl",
		"--work--/c1\u0085ctl.jsonl":  "--work--/c1_ctl.jsonl",
		"--work--/été ✓ 日本.jsonl":     "--work--/été ✓ 日本.jsonl",
		"--work--/x\uFFFDy\xfe.jsonl": "--work--/x\uFFFDy_.jsonl",
	} {
		got := publishedFile(in)
		if got != want {
			t.Errorf("publishedFile(%q) = %q, want %q", in, got, want)
		}
		if err := admit.ValidFile(got); err != nil {
			t.Errorf("publishedFile(%q) = %q, which the other machines refuse: %v", in, got, err)
		}
	}
}
