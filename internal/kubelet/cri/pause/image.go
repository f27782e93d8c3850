package pause

import "github.com/skiff-sh/skiff/internal/kubelet/cri/ociimage"

// Path is where the program lives in the image.
const Path = "/pause"

// Image returns the one-layer OCI image holding the pause program for
// goarch, with it as entrypoint. The image is a few hundred bytes and its
// digests are the same on every build.
func Image(goarch string) (*ociimage.Image, error) {
	elf, err := ELF(goarch)
	if err != nil {
		return nil, err
	}
	return ociimage.Build(ociimage.Spec{
		Arch:       goarch,
		Files:      []ociimage.File{{Path: Path, Mode: 0o755, Data: elf}},
		Entrypoint: []string{Path},
	})
}
