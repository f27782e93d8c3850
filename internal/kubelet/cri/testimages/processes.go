package testimages

import (
	"bytes"
	"os"
	"strconv"
	"strings"
)

// ProcessesMentioning lists "pid cmdline" of the processes whose command
// line contains s (a test's data dir: the shims of a containerd it
// started outlive containerd by design), this process excepted.
func ProcessesMentioning(s string) []string {
	entries, _ := os.ReadDir("/proc")
	var found []string
	self := strconv.Itoa(os.Getpid())
	for _, e := range entries {
		if e.Name()[0] < '0' || e.Name()[0] > '9' || e.Name() == self {
			continue
		}
		cmdline, err := os.ReadFile("/proc/" + e.Name() + "/cmdline")
		if err != nil || !bytes.Contains(cmdline, []byte(s)) {
			continue
		}
		found = append(found, e.Name()+" "+strings.ReplaceAll(string(bytes.TrimRight(cmdline, "\x00")), "\x00", " "))
	}
	return found
}
