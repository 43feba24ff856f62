package main

import (
	"errors"
	"fmt"
	"strings"
	"syscall"
)

// listener is a setting that names an address to listen on.
type listener struct{ setting, addr string }

// inUse explains err when it says one of the listeners' addresses is
// taken: which setting names it and what to do (another NATS server on
// 4222 is a common case). The error is the system's (net.Listen) or
// nats-server's, which says it only in words, with the address; any other
// error is returned as it is.
func inUse(err error, ls ...listener) error {
	if err == nil {
		return nil
	}
	msg := err.Error()
	if !errors.Is(err, syscall.EADDRINUSE) && !strings.Contains(msg, "address already in use") {
		return err
	}
	for _, l := range ls {
		if l.addr != "" && strings.Contains(msg, l.addr) {
			return fmt.Errorf("%s %s is taken: another program, or another pisyncd, listens there; set %s to a free address (%w)", l.setting, l.addr, l.setting, err)
		}
	}
	return err
}
