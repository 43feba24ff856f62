package web

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
)

// socketOwner is the user owning the TCP socket whose local end is local
// and whose remote end is remote, in the network namespace of this process,
// which a loopback connection's two ends share: the kernel's answer to one
// question (diagOwner), or where it gives none, /proc/net/tcp and
// /proc/net/tcp6.
func socketOwner(local, remote *net.TCPAddr) (int, bool) {
	if uid, found, err := diagOwner(local, remote); err == nil {
		return uid, found
	}
	return tableOwner(local, remote)
}

// tableOwner is socketOwner from the kernel's tables of every socket.
func tableOwner(local, remote *net.TCPAddr) (int, bool) {
	for _, file := range []string{"/proc/net/tcp", "/proc/net/tcp6"} {
		want := [2]string{procAddr(local, file), procAddr(remote, file)}
		if want[0] == "" || want[1] == "" {
			continue
		}
		b, err := os.ReadFile(file)
		if err != nil {
			continue
		}
		if uid, ok := findSocketOwner(b, want); ok {
			return uid, true
		}
	}
	return 0, false
}

// findSocketOwner finds the line of a /proc/net/tcp table whose local and
// remote addresses are want, and returns its uid column.
func findSocketOwner(table []byte, want [2]string) (int, bool) {
	sc := bufio.NewScanner(bytes.NewReader(table))
	sc.Scan() // the column names
	for sc.Scan() {
		// sl local_address rem_address st tx_queue:rx_queue tr:tm->when retrnsmt uid ...
		f := strings.Fields(sc.Text())
		if len(f) < 8 || !strings.EqualFold(f[1], want[0]) || !strings.EqualFold(f[2], want[1]) {
			continue
		}
		uid, err := strconv.Atoi(f[7])
		return uid, err == nil
	}
	return 0, false
}

// procAddr writes a as the kernel does in file: the address as 32-bit
// words in host order, in hex, then the port; "" when
// a has no form in that file.
func procAddr(a *net.TCPAddr, file string) string {
	ip := a.IP
	if strings.HasSuffix(file, "6") {
		ip = ip.To16()
		if ip == nil {
			return ""
		}
	} else if ip = ip.To4(); ip == nil {
		return ""
	}
	var out []byte
	for i := 0; i < len(ip); i += 4 {
		var w [4]byte
		binary.NativeEndian.PutUint32(w[:], binary.BigEndian.Uint32(ip[i:i+4]))
		out = hex.AppendEncode(out, w[:])
	}
	return fmt.Sprintf("%s:%04X", strings.ToUpper(string(out)), a.Port)
}
