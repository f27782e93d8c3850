package testimages

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"sync"

	"github.com/skiff-sh/skiff/internal/kubelet/cri/ociimage"
)

// BusyboxBinary is where Debian's busybox-static installs the static
// busybox.
const BusyboxBinary = "/bin/busybox"

// Name and tag under which PushBusybox pushes the busybox image.
const (
	BusyboxRepository = "busybox"
	BusyboxTag        = "1.36"
)

// DefaultPath is the PATH of images built here.
const DefaultPath = "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

var (
	busyboxOnce sync.Once
	busyboxImg  *ociimage.Image
	busyboxErr  error
)

// Busybox returns the busybox image: one gzip layer with /bin/busybox,
// every applet it lists linked to it (/bin/sh, /bin/sleep, /usr/bin/wget,
// …), /etc/passwd and /etc/group with root and nobody, /tmp and /root; the
// default command is sh. (Debian's busybox 1.35 `wget -T` crashes with
// SIGSEGV; bound wget with the exec timeout instead.) It is built once per process; the result is
// shared and must not be modified. It fails when busybox-static is not
// installed.
func Busybox() (*ociimage.Image, error) {
	busyboxOnce.Do(func() { busyboxImg, busyboxErr = buildBusybox(BusyboxBinary) })
	return busyboxImg, busyboxErr
}

// buildBusybox builds the busybox image from the static busybox at bin.
func buildBusybox(bin string) (*ociimage.Image, error) {
	data, err := os.ReadFile(bin)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("testimages: %s missing; install it with: apt-get install busybox-static", bin)
	}
	if err != nil {
		return nil, fmt.Errorf("testimages: %w", err)
	}
	out, err := exec.Command(bin, "--list-full").Output()
	if err != nil {
		return nil, fmt.Errorf("testimages: %s --list-full: %w", bin, err)
	}
	files := []ociimage.File{
		{Path: "bin/busybox", Mode: 0o755, Data: data},
		{Path: "etc/passwd", Mode: 0o644, Data: []byte("root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/nonexistent:/bin/false\n")},
		{Path: "etc/group", Mode: 0o644, Data: []byte("root:x:0:\nnobody:x:65534:\n")},
		{Path: "tmp", Mode: fs.ModeDir | fs.ModeSticky | 0o777},
		{Path: "root", Mode: fs.ModeDir | 0o700},
	}
	for _, applet := range strings.Fields(string(out)) {
		if applet == "bin/busybox" {
			continue
		}
		files = append(files, ociimage.File{Path: applet, Mode: fs.ModeSymlink, Link: "/bin/busybox"})
	}
	return ociimage.Build(ociimage.Spec{
		Arch:  runtime.GOARCH,
		Files: files,
		Env:   []string{DefaultPath},
		Cmd:   []string{"sh"},
		Gzip:  true,
	})
}
