package session

import "io"

// ReportJSON is a context as the daemon's /context and `context --json`
// print it: the corpus shape with the rule set that built it first,
//
//	{"rules":"pi-1.6","rulesMode":"auto","leafId":…,"contextEntryIds":…}
//
// rules is the set the context followed (seed or pi-1.6); rulesMode is
// the one asked for (PISYNC_RULES or --rules): auto when the session's
// lines chose rules. Both are additions: a reader of the corpus shape
// ignores them. It lives here, beside the corpus shape, so that every
// writer of it (the daemon, the store, the one-shot `context FILE` of
// both binaries) shares one.
func ReportJSON(c *Context, mode RuleSet) ([]byte, error) {
	body, err := c.MarshalJSON()
	if err != nil {
		return nil, err
	}
	return append(reportHead(c.Rules, mode), body[1:]...), nil
}

// WriteReport writes ix as ReportJSON would, streaming the messages: the
// rules fields, then ix.WriteContext's object without its opening brace.
func WriteReport(out io.Writer, ix *Index, src BodySource, mode RuleSet) error {
	if _, err := out.Write(reportHead(ix.Rules, mode)); err != nil {
		return err
	}
	return ix.WriteContext(&skipFirstByte{w: out}, src)
}

// reportHead opens the context object with the rule set used and the one
// asked for: {"rules":…,"rulesMode":…, (the corpus shape follows without
// its opening brace).
func reportHead(used, asked RuleSet) []byte {
	head := append([]byte(`{"rules":`), jsonQuote(used.String())...)
	head = append(head, `,"rulesMode":`...)
	head = append(head, jsonQuote(asked.String())...)
	return append(head, ',')
}

// skipFirstByte drops the first byte written through it (the opening
// brace that reportHead has already written).
type skipFirstByte struct {
	w       io.Writer
	skipped bool
}

func (s *skipFirstByte) Write(p []byte) (int, error) {
	if s.skipped || len(p) == 0 {
		return s.w.Write(p)
	}
	s.skipped = true
	n, err := s.w.Write(p[1:])
	return n + 1, err
}
