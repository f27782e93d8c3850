package cri

import (
	"fmt"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// Snapshotters the generated config chooses from.
const (
	SnapshotterOverlay = "overlayfs"
	SnapshotterNative  = "native"
)

// chooseSnapshotter returns want when it is set, else overlayfs if an
// overlay mount works in dir (containerd's root), else native (which copies
// layers and works everywhere). reason says why overlayfs was not chosen.
func chooseSnapshotter(want, dir string) (name, reason string) {
	if want != "" {
		return want, ""
	}
	if err := tryOverlayMount(dir); err != nil {
		return SnapshotterNative, err.Error()
	}
	return SnapshotterOverlay, ""
}

// tryOverlayMount mounts an overlay filesystem in a temporary directory
// under dir and unmounts it.
func tryOverlayMount(dir string) error {
	tmp, err := os.MkdirTemp(dir, "overlay-check-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	sub := map[string]string{}
	for _, name := range []string{"lower", "upper", "work", "merged"} {
		sub[name] = filepath.Join(tmp, name)
		if err := os.Mkdir(sub[name], 0o700); err != nil {
			return err
		}
	}
	opts := fmt.Sprintf("lowerdir=%s,upperdir=%s,workdir=%s", sub["lower"], sub["upper"], sub["work"])
	if err := unix.Mount("overlay", sub["merged"], "overlay", 0, opts); err != nil {
		return fmt.Errorf("overlay mount in %s: %w", dir, err)
	}
	if err := unix.Unmount(sub["merged"], 0); err != nil {
		return fmt.Errorf("unmount overlay check in %s: %w", dir, err)
	}
	return nil
}
