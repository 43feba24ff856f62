package config

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// ByteSize is a size in bytes written as 123, 64KiB, 16MiB or 2GiB (KB, MB,
// GB are read as the same powers of two).
type ByteSize int64

var units = []struct {
	suffix string
	mult   int64
}{{"KiB", 1 << 10}, {"MiB", 1 << 20}, {"GiB", 1 << 30}, {"TiB", 1 << 40}, {"KB", 1 << 10}, {"MB", 1 << 20}, {"GB", 1 << 30}, {"TB", 1 << 40}, {"K", 1 << 10}, {"M", 1 << 20}, {"G", 1 << 30}, {"T", 1 << 40}, {"B", 1}}

// maxSize is the largest ByteSize: sums of a few sizes stay within int64.
const maxSize = 1 << 62

// errSizeTooLarge: a size past maxSize, well formed.
var errSizeTooLarge = fmt.Errorf("too large: at most %s", ByteSize(maxSize))

// Decode implements envconfig.Decoder.
func (b *ByteSize) Decode(s string) error {
	s = strings.TrimSpace(s)
	mult := int64(1)
	for _, u := range units {
		if strings.HasSuffix(s, u.suffix) {
			s, mult = strings.TrimSpace(strings.TrimSuffix(s, u.suffix)), u.mult
			break
		}
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if errors.Is(err, strconv.ErrRange) && !strings.HasPrefix(s, "-") || err == nil && n > maxSize/mult {
		return errSizeTooLarge
	}
	if err != nil || n < 0 {
		return fmt.Errorf("invalid size %q (want e.g. 512KiB, 64MiB, 2GiB)", s)
	}
	*b = ByteSize(n * mult)
	return nil
}

func (b ByteSize) String() string {
	for _, u := range []struct {
		s string
		m int64
	}{{"TiB", 1 << 40}, {"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}} {
		if int64(b) >= u.m && int64(b)%u.m == 0 {
			return strconv.FormatInt(int64(b)/u.m, 10) + u.s
		}
	}
	return strconv.FormatInt(int64(b), 10) + "B"
}
