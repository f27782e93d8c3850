// Package netnslock lets one process at a time own a node-wide networking
// component in a network namespace: kube-proxy's nftables table, the
// network policy queue. Such a component rewrites state that has one fixed
// name per namespace, so two of them would undo each other's work. The
// lock is a file named for the component and the namespace's inode,
// flock'ed for as long as the component runs and holding its PID; the
// kernel drops it when the process ends, however it ends.
package netnslock

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// DefaultDir is where skiff's components keep their locks.
const DefaultDir = "/run/skiff"

// HeldError is Acquire's error when another process holds the lock.
type HeldError struct {
	// Path is the lock file; PID is what its holder wrote in it.
	Path, PID string
}

func (e *HeldError) Error() string {
	return fmt.Sprintf("lock %s is held by pid %s", e.Path, e.PID)
}

// Acquire takes the lock of component in this process's network namespace
// (a file in dir, created if missing) without waiting. release closes it.
func Acquire(dir, component string) (release func(), err error) {
	var st syscall.Stat_t
	if err := syscall.Stat("/proc/self/ns/net", &st); err != nil {
		return nil, fmt.Errorf("%s: network namespace: %w", component, err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("%s: lock dir: %w", component, err)
	}
	path := filepath.Join(dir, component+"-netns-"+strconv.FormatUint(st.Ino, 10)+".lock")
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("%s: lock: %w", component, err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		holder, _ := os.ReadFile(path)
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, &HeldError{Path: path, PID: strings.TrimSpace(string(holder))}
		}
		return nil, fmt.Errorf("%s: lock %s: %w", component, path, err)
	}
	if err := f.Truncate(0); err == nil {
		_, _ = f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	}
	return func() { f.Close() }, nil
}
