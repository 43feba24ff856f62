package testenv

import (
	"os"
	"strconv"
	"strings"
)

// ProcStatus reads a "kB" field of /proc/self/status (VmRSS, VmHWM,
// RssFile), in bytes; 0 where there is no such file or field.
func ProcStatus(field string) int64 {
	data, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for _, l := range strings.Split(string(data), "\n") {
		k, v, ok := strings.Cut(l, ":")
		if !ok || k != field {
			continue
		}
		kb, _ := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
		return kb << 10
	}
	return 0
}
