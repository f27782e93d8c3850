package fakeruntime

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"strings"

	"github.com/distribution/reference"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// normalize turns a reference into its full form
// (busybox → docker.io/library/busybox:latest); unparsable references are
// kept as they are.
func normalize(ref string) string {
	if strings.HasPrefix(ref, "sha256:") {
		return ref
	}
	named, err := reference.ParseNormalizedNamed(ref)
	if err != nil {
		return ref
	}
	return reference.TagNameOnly(named).String()
}

func imageID(ref string) string {
	sum := sha256.Sum256([]byte(ref))
	return "sha256:" + hex.EncodeToString(sum[:])
}

// storeImage adds or returns the local image for a normalized ref. Called
// with mu held.
func (r *Runtime) storeImage(ref string, size uint64) *image {
	if img := r.findImage(ref); img != nil {
		return img
	}
	id := imageID(ref)
	name := ref
	if i := strings.LastIndex(ref, ":"); i > strings.LastIndex(ref, "/") {
		name = ref[:i]
	}
	img := &image{img: &runtimeapi.Image{
		Id: id, RepoTags: []string{ref}, RepoDigests: []string{name + "@" + id}, Size: size,
		Spec: &runtimeapi.ImageSpec{Image: ref},
	}}
	r.images[id] = img
	return img
}

// findImage finds a local image by ID, reference or digest. Called with mu held.
func (r *Runtime) findImage(ref string) *image {
	if img, ok := r.images[ref]; ok {
		return img
	}
	n := normalize(ref)
	for _, img := range r.images {
		for _, t := range append(append([]string{}, img.img.RepoTags...), img.img.RepoDigests...) {
			if t == n || t == ref {
				return img
			}
		}
	}
	return nil
}

// ListImages implements ImageManagerService.
func (r *Runtime) ListImages(ctx context.Context, filter *runtimeapi.ImageFilter) ([]*runtimeapi.Image, error) {
	if err := r.enter("ListImages"); err != nil {
		return nil, err
	}
	defer r.mu.Unlock()
	var out []*runtimeapi.Image
	for _, img := range r.images {
		if f := filter.GetImage().GetImage(); f != "" && r.findImage(f) != img {
			continue
		}
		out = append(out, img.img)
	}
	return out, nil
}

// ImageStatus returns the image, or a nil Image when it is not present.
func (r *Runtime) ImageStatus(ctx context.Context, spec *runtimeapi.ImageSpec, verbose bool) (*runtimeapi.ImageStatusResponse, error) {
	if err := r.enter("ImageStatus"); err != nil {
		return nil, err
	}
	defer r.mu.Unlock()
	img := r.findImage(spec.GetImage())
	if img == nil {
		return &runtimeapi.ImageStatusResponse{}, nil
	}
	return &runtimeapi.ImageStatusResponse{Image: img.img}, nil
}

// PullImage pulls from the fake registry, checking credentials when the
// image requires them; errors read like containerd's.
func (r *Runtime) PullImage(ctx context.Context, spec *runtimeapi.ImageSpec, auth *runtimeapi.AuthConfig, sandboxConfig *runtimeapi.PodSandboxConfig) (string, error) {
	if err := r.enter("PullImage"); err != nil {
		return "", err
	}
	defer r.mu.Unlock()
	ref := normalize(spec.GetImage())
	reg, ok := r.registry[ref]
	if !ok {
		return "", status.Errorf(codes.NotFound, "failed to pull and unpack image %q: failed to resolve reference %q: %s: not found", ref, ref, ref)
	}
	if reg.Username != "" {
		user, pass := auth.GetUsername(), auth.GetPassword()
		if a := auth.GetAuth(); a != "" && user == "" {
			if b, err := base64.StdEncoding.DecodeString(a); err == nil {
				user, pass, _ = strings.Cut(string(b), ":")
			}
		}
		if user != reg.Username || pass != reg.Password {
			return "", status.Errorf(codes.Unknown, "failed to pull and unpack image %q: failed to resolve reference %q: pull access denied, repository does not exist or may require authorization: authorization failed: 401 Unauthorized", ref, ref)
		}
	}
	return r.storeImage(ref, reg.Size).img.Id, nil
}

// RemoveImage implements ImageManagerService.
func (r *Runtime) RemoveImage(ctx context.Context, spec *runtimeapi.ImageSpec) error {
	if err := r.enter("RemoveImage"); err != nil {
		return err
	}
	defer r.mu.Unlock()
	if img := r.findImage(spec.GetImage()); img != nil {
		delete(r.images, img.img.Id)
	}
	return nil
}

// ImageFsInfo reports the sum of the image sizes.
func (r *Runtime) ImageFsInfo(ctx context.Context) (*runtimeapi.ImageFsInfoResponse, error) {
	if err := r.enter("ImageFsInfo"); err != nil {
		return nil, err
	}
	defer r.mu.Unlock()
	var used uint64
	for _, img := range r.images {
		used += img.img.Size
	}
	fs := &runtimeapi.FilesystemUsage{Timestamp: r.clock.Now().UnixNano(), FsId: &runtimeapi.FilesystemIdentifier{Mountpoint: "/fake"},
		UsedBytes: &runtimeapi.UInt64Value{Value: used}, InodesUsed: &runtimeapi.UInt64Value{Value: uint64(len(r.images))}}
	return &runtimeapi.ImageFsInfoResponse{ImageFilesystems: []*runtimeapi.FilesystemUsage{fs}}, nil
}

// ImageFsCapacity is the size of the simulated image filesystem.
const ImageFsCapacity = 100 << 30

// ImageFsStat is a kubelet's ImageFsStat for this runtime: its image
// filesystem holds ImageFsCapacity bytes, of which its images use their
// sizes.
func (r *Runtime) ImageFsStat(mountpoint string) (capacity, available uint64, err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	var used uint64
	for _, img := range r.images {
		used += img.img.Size
	}
	return ImageFsCapacity, ImageFsCapacity - min(used, ImageFsCapacity), nil
}
