package main

import (
	"bytes"
	"encoding/xml"
	"fmt"
	"strings"
	"text/template"
	"unicode"
)

// serviceFuncs quote a path for the file it goes into: a binary under a
// folder with a space (a macOS home, "Application Support") or a '%', '$',
// '&' or '<' in its path gave a unit systemd split into two words and
// expanded, and a plist that was not XML.
var serviceFuncs = template.FuncMap{"unitWord": unitWord, "xmlText": xmlText}

// unitPath refuses a path systemd runs no executable from: one holding a
// quote or a backslash ("Executable name contains special characters").
func unitPath(what, path string) error {
	if strings.ContainsAny(path, `"'\`) {
		return fmt.Errorf("%s %q holds a quote or a backslash, and systemd runs no executable from such a path: move the binary, e.g. to /usr/local/bin/pisyncd", what, path)
	}
	return nil
}

// unitWord is path as the executable of a systemd command line
// (systemd.service, "Command lines"): '%' doubled so it is no specifier,
// and the word quoted when it holds anything but letters, digits and
// "/._-+%" (unitPath refuses the quote and backslash a quoted word would
// escape). systemd expands no variable in the executable, so a '$' stays
// as it is (doubled, it would stay doubled: systemd-analyze verify then
// finds no such file).
func unitWord(path string) string {
	path = strings.ReplaceAll(path, "%", "%%")
	if strings.IndexFunc(path, func(r rune) bool {
		return !(r < unicode.MaxASCII && (unicode.IsLetter(r) || unicode.IsDigit(r) || strings.ContainsRune("/._-+%", r)))
	}) < 0 {
		return path
	}
	return `"` + path + `"`
}

// xmlText is s escaped as XML character data.
func xmlText(s string) (string, error) {
	var b bytes.Buffer
	err := xml.EscapeText(&b, []byte(s))
	return b.String(), err
}

// servicePath refuses a path no service file can hold: a control character
// (a newline ends a unit's line).
func servicePath(what, path string) error {
	if i := strings.IndexFunc(path, unicode.IsControl); i >= 0 {
		return fmt.Errorf("%s %q holds a control character, which a service file cannot hold: move the binary (or the home folder) to a path without one", what, path)
	}
	return nil
}
