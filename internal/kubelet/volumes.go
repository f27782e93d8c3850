package kubelet

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	volumeutil "k8s.io/kubernetes/pkg/volume/util"
)

// volumesDir holds a pod's volumes, one directory per plugin as the
// kubelet lays them out.
func (k *Kubelet) volumesDir(uid types.UID) string { return filepath.Join(k.podDir(uid), "volumes") }

func pluginDir(v *corev1.Volume) string {
	switch {
	case v.EmptyDir != nil:
		return "kubernetes.io~empty-dir"
	case v.ConfigMap != nil:
		return "kubernetes.io~configmap"
	case v.Secret != nil:
		return "kubernetes.io~secret"
	case v.DownwardAPI != nil:
		return "kubernetes.io~downward-api"
	case v.Projected != nil:
		return "kubernetes.io~projected"
	}
	return ""
}

// volumePath is where a pod's volume is on the node.
func (k *Kubelet) volumePath(pod *corev1.Pod, name string) (string, bool) {
	for i := range pod.Spec.Volumes {
		v := &pod.Spec.Volumes[i]
		if v.Name != name {
			continue
		}
		if v.HostPath != nil {
			return v.HostPath.Path, true
		}
		if p := pluginDir(v); p != "" {
			return filepath.Join(k.volumesDir(pod.UID), p, v.Name), true
		}
	}
	return "", false
}

// mountVolumes sets up every volume of the pod (and refreshes configMap,
// secret, downwardAPI and projected contents). Failures are FailedMount
// events; the first error is returned.
func (k *Kubelet) mountVolumes(ctx context.Context, pod *corev1.Pod) error {
	var first error
	for i := range pod.Spec.Volumes {
		v := &pod.Spec.Volumes[i]
		if err := k.mountVolume(ctx, pod, v); err != nil {
			k.event(pod, "", corev1.EventTypeWarning, "FailedMount", fmt.Sprintf("MountVolume.SetUp failed for volume %q : %v", v.Name, err))
			if first == nil {
				first = fmt.Errorf("volume %q: %w", v.Name, err)
			}
		}
	}
	return first
}

func (k *Kubelet) mountVolume(ctx context.Context, pod *corev1.Pod, v *corev1.Volume) error {
	dir, _ := k.volumePath(pod, v.Name)
	switch {
	case v.HostPath != nil:
		return setupHostPath(v.HostPath)
	case v.EmptyDir != nil:
		// Set up once, as upstream's emptyDir marks itself ready: the
		// ownership step would otherwise give what the containers made
		// since group write on every sync.
		ready := emptyDirReadyPath(dir)
		if _, err := os.Stat(ready); err == nil {
			_, statErr := os.Stat(dir)
			if statErr == nil && (v.EmptyDir.Medium != corev1.StorageMediumMemory || isMountPoint(dir)) {
				return nil
			}
			_ = os.Remove(ready)
		}
		if err := os.MkdirAll(dir, 0o777); err != nil {
			return err
		}
		_ = os.Chmod(dir, 0o777)
		if v.EmptyDir.Medium == corev1.StorageMediumMemory && !isMountPoint(dir) {
			opts := ""
			if v.EmptyDir.SizeLimit != nil && !v.EmptyDir.SizeLimit.IsZero() {
				opts = fmt.Sprintf("size=%d", v.EmptyDir.SizeLimit.Value())
			}
			if err := unix.Mount("tmpfs", dir, "tmpfs", 0, opts); err != nil {
				slog.Warn("emptyDir medium Memory: tmpfs mount failed, using a directory", "pod", klogRef(pod), "volume", v.Name, "err", err)
			}
			_ = os.Chmod(dir, 0o777)
		}
		if g := podFSGroup(pod); g != nil {
			// A writable volume: what the pod's containers make in it
			// inherits the group (setgid).
			if err := setVolumeOwnership(dir, *g, false); err != nil {
				return err
			}
		}
		return os.WriteFile(ready, nil, 0o600)
	case v.ConfigMap != nil:
		files, err := k.configMapFiles(ctx, pod, v.ConfigMap.Name, v.ConfigMap.Items, v.ConfigMap.Optional, v.ConfigMap.DefaultMode)
		if err != nil {
			return err
		}
		return writeAtomic(dir, files, podFSGroup(pod))
	case v.Secret != nil:
		files, err := k.secretFiles(ctx, pod, v.Secret.SecretName, v.Secret.Items, v.Secret.Optional, v.Secret.DefaultMode)
		if err != nil {
			return err
		}
		return writeAtomic(dir, files, podFSGroup(pod))
	case v.DownwardAPI != nil:
		files, err := k.downwardFiles(pod, v.DownwardAPI.Items, v.DownwardAPI.DefaultMode)
		if err != nil {
			return err
		}
		return writeAtomic(dir, files, podFSGroup(pod))
	case v.Projected != nil:
		files := map[string]file{}
		for i, src := range v.Projected.Sources {
			var part map[string]file
			var err error
			switch {
			case src.ConfigMap != nil:
				part, err = k.configMapFiles(ctx, pod, src.ConfigMap.Name, src.ConfigMap.Items, src.ConfigMap.Optional, v.Projected.DefaultMode)
			case src.Secret != nil:
				part, err = k.secretFiles(ctx, pod, src.Secret.Name, src.Secret.Items, src.Secret.Optional, v.Projected.DefaultMode)
			case src.DownwardAPI != nil:
				part, err = k.downwardFiles(pod, src.DownwardAPI.Items, v.Projected.DefaultMode)
			case src.ServiceAccountToken != nil:
				part, err = k.tokenFile(ctx, pod, src.ServiceAccountToken, v.Projected.DefaultMode)
			case src.ClusterTrustBundle != nil:
				part, err = k.trustBundleFile(ctx, pod, src.ClusterTrustBundle, v.Projected.DefaultMode)
			case src.PodCertificate != nil:
				part, err = k.podCertificateFiles(ctx, pod, v.Name, i, src.PodCertificate, v.Projected.DefaultMode)
			}
			if err != nil {
				return err
			}
			for p, f := range part {
				files[p] = f
			}
		}
		return writeAtomic(dir, files, podFSGroup(pod))
	}
	return errors.New("volume type not supported by this node")
}

func setupHostPath(hp *corev1.HostPathVolumeSource) error {
	t := corev1.HostPathUnset
	if hp.Type != nil {
		t = *hp.Type
	}
	fi, err := os.Stat(hp.Path)
	switch t {
	case corev1.HostPathUnset:
		return nil
	case corev1.HostPathDirectoryOrCreate:
		if os.IsNotExist(err) {
			return os.MkdirAll(hp.Path, 0o755)
		}
		if err == nil && !fi.IsDir() {
			return fmt.Errorf("hostPath type check failed: %s is not a directory", hp.Path)
		}
	case corev1.HostPathFileOrCreate:
		if os.IsNotExist(err) {
			if err := os.MkdirAll(filepath.Dir(hp.Path), 0o755); err != nil {
				return err
			}
			f, err := os.OpenFile(hp.Path, os.O_CREATE, 0o644)
			if err != nil {
				return err
			}
			return f.Close()
		}
		if err == nil && fi.IsDir() {
			return fmt.Errorf("hostPath type check failed: %s is not a file", hp.Path)
		}
	case corev1.HostPathDirectory:
		if err != nil || !fi.IsDir() {
			return fmt.Errorf("hostPath type check failed: %s is not a directory", hp.Path)
		}
	case corev1.HostPathFile:
		if err != nil || !fi.Mode().IsRegular() {
			return fmt.Errorf("hostPath type check failed: %s is not a file", hp.Path)
		}
	case corev1.HostPathSocket:
		if err != nil || fi.Mode()&os.ModeSocket == 0 {
			return fmt.Errorf("hostPath type check failed: %s is not a socket file", hp.Path)
		}
	case corev1.HostPathCharDev:
		if err != nil || fi.Mode()&os.ModeCharDevice == 0 {
			return fmt.Errorf("hostPath type check failed: %s is not a character device", hp.Path)
		}
	case corev1.HostPathBlockDev:
		if err != nil || fi.Mode()&os.ModeDevice == 0 || fi.Mode()&os.ModeCharDevice != 0 {
			return fmt.Errorf("hostPath type check failed: %s is not a block device", hp.Path)
		}
	}
	return nil
}

// file is one file of a volume's payload. uid and gid, when set, are its
// owner and group; otherwise it is the kubelet's.
type file struct {
	data     []byte
	mode     os.FileMode
	uid, gid *int64
}

func fileMode(item, def *int32) os.FileMode {
	switch {
	case item != nil:
		return os.FileMode(*item)
	case def != nil:
		return os.FileMode(*def)
	}
	return 0o644
}

func (k *Kubelet) configMapFiles(ctx context.Context, pod *corev1.Pod, name string, items []corev1.KeyToPath, optional *bool, defMode *int32) (map[string]file, error) {
	cm, err := k.client.CoreV1().ConfigMaps(pod.Namespace).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		if optional != nil && *optional {
			return map[string]file{}, nil
		}
		return nil, fmt.Errorf("configmap %q not found", name)
	}
	data := map[string][]byte{}
	for k, v := range cm.Data {
		data[k] = []byte(v)
	}
	for k, v := range cm.BinaryData {
		data[k] = v
	}
	return project(data, items, optional, defMode, "configmap", name)
}

func (k *Kubelet) secretFiles(ctx context.Context, pod *corev1.Pod, name string, items []corev1.KeyToPath, optional *bool, defMode *int32) (map[string]file, error) {
	s, err := k.client.CoreV1().Secrets(pod.Namespace).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		if optional != nil && *optional {
			return map[string]file{}, nil
		}
		return nil, fmt.Errorf("secret %q not found", name)
	}
	return project(s.Data, items, optional, defMode, "secret", name)
}

func project(data map[string][]byte, items []corev1.KeyToPath, optional *bool, defMode *int32, kind, name string) (map[string]file, error) {
	out := map[string]file{}
	if len(items) == 0 {
		for k, v := range data {
			out[k] = file{data: v, mode: fileMode(nil, defMode)}
		}
		return out, nil
	}
	for _, it := range items {
		v, ok := data[it.Key]
		if !ok {
			if optional != nil && *optional {
				continue
			}
			return nil, fmt.Errorf("configuration of %s %q has no key %q", kind, name, it.Key)
		}
		out[it.Path] = file{data: v, mode: fileMode(it.Mode, defMode)}
	}
	return out, nil
}

func (k *Kubelet) downwardFiles(pod *corev1.Pod, items []corev1.DownwardAPIVolumeFile, defMode *int32) (map[string]file, error) {
	out := map[string]file{}
	podIP := pod.Status.PodIP
	for _, it := range items {
		var v string
		var err error
		switch {
		case it.FieldRef != nil:
			v, err = podField(pod, it.FieldRef.FieldPath, podIP, k.hostIPs)
		case it.ResourceFieldRef != nil:
			c, _ := findContainer(pod, it.ResourceFieldRef.ContainerName)
			if c == nil {
				return nil, fmt.Errorf("container %q not found", it.ResourceFieldRef.ContainerName)
			}
			v, err = k.resourceField(c, it.ResourceFieldRef)
		}
		if err != nil {
			return nil, err
		}
		out[it.Path] = file{data: []byte(v), mode: fileMode(it.Mode, defMode)}
	}
	return out, nil
}

// tokenFile is a projected serviceAccountToken source: a token of the
// pod's service account bound to the pod, from the token manager (which
// renews it after 80% of its lifetime or 24 hours; every sync passes
// here). Its mode is the volume's, or 0600 owned by the pod's user when
// all its containers run as one, or 0640 in the pod's fsGroup, as the
// kubelet's projected volume plugin leaves it.
func (k *Kubelet) tokenFile(ctx context.Context, pod *corev1.Pod, src *corev1.ServiceAccountTokenProjection, defMode *int32) (map[string]file, error) {
	req := &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{
		ExpirationSeconds: src.ExpirationSeconds,
		BoundObjectRef:    &authenticationv1.BoundObjectReference{Kind: "Pod", APIVersion: "v1", Name: pod.Name, UID: pod.UID},
	}}
	if src.Audience != "" {
		req.Spec.Audiences = []string{src.Audience}
	}
	tr, err := k.tokens.Get(ctx, pod.Namespace, pod.Spec.ServiceAccountName, req)
	if err != nil {
		return nil, err
	}
	f := file{data: []byte(tr.Status.Token), mode: fileMode(nil, defMode)}
	if f.uid = volumeutil.FsUserFrom(pod); f.uid != nil {
		f.mode = 0o600
	}
	if sc := pod.Spec.SecurityContext; sc != nil && sc.FSGroup != nil {
		// The kubelet writes 0600, then its volume ownership pass adds
		// group read and the fsGroup.
		f.mode, f.gid = 0o640, sc.FSGroup
	}
	return map[string]file{src.Path: f}, nil
}

// trustBundleFile is a clusterTrustBundle projection, as the kubelet's
// projected volume plugin writes it from upstream's ClusterTrustBundle
// manager: the bundle named, or every certificate of the bundles of a
// signer that match the label selector, deduplicated. A missing bundle
// (or an empty set) is an error unless the source is optional, when the
// file is empty.
func (k *Kubelet) trustBundleFile(ctx context.Context, pod *corev1.Pod, src *corev1.ClusterTrustBundleProjection, defMode *int32) (map[string]file, error) {
	allowMissing := src.Optional != nil && *src.Optional
	var anchors []byte
	var err error
	switch {
	case src.Name != nil:
		anchors, err = k.trustBundles.GetTrustAnchorsByName(ctx, *src.Name, allowMissing)
	case src.SignerName != nil:
		anchors, err = k.trustBundles.GetTrustAnchorsBySigner(ctx, *src.SignerName, src.LabelSelector, allowMissing)
	default:
		err = errors.New("ClusterTrustBundle projection requires either name or signerName to be set")
	}
	if err != nil {
		return nil, err
	}
	f := file{data: anchors, mode: fileMode(nil, defMode)}
	f.uid = volumeutil.FsUserFrom(pod)
	return map[string]file{src.Path: f}, nil
}

// writeAtomic publishes a volume's payload the way the kubelet's atomic
// writer does: files in a timestamped directory, a "..data" symlink
// switched with a rename, and top-level entries linking through it, so a
// reader never sees half an update. Unchanged payloads are not rewritten.
//
// With fsGroup set, the files, directories and links are then given that
// group and group read (setVolumeOwnership), as the kubelet does to these
// volumes of a pod with spec.securityContext.fsGroup.
func writeAtomic(dir string, files map[string]file, fsGroup *int64) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	paths := sortedKeys(files)
	h := sha256.New()
	fmt.Fprintf(h, "fsGroup=%d\x00", idOr(fsGroup, -1))
	for _, p := range paths {
		f := files[p]
		fmt.Fprintf(h, "%s\x00%o\x00%d\x00%d\x00%d\x00", p, f.mode, idOr(f.uid, -1), idOr(f.gid, -1), len(f.data))
		h.Write(files[p].data)
	}
	sum := hex.EncodeToString(h.Sum(nil))
	dataLink := filepath.Join(dir, "..data")
	if b, err := os.ReadFile(filepath.Join(dataLink, "..hash")); err == nil && string(b) == sum {
		return nil
	}
	old, _ := os.Readlink(dataLink)
	tsDir, err := os.MkdirTemp(dir, "..ts_")
	if err != nil {
		return err
	}
	_ = os.Chmod(tsDir, 0o755)
	for _, p := range paths {
		clean := filepath.Clean(p)
		if filepath.IsAbs(clean) || strings.HasPrefix(clean, "..") {
			return fmt.Errorf("invalid path %q", p)
		}
		full := filepath.Join(tsDir, clean)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(full, files[p].data, files[p].mode); err != nil {
			return err
		}
		_ = os.Chmod(full, files[p].mode)
		if f := files[p]; f.uid != nil || f.gid != nil {
			if err := os.Lchown(full, idOr(f.uid, -1), idOr(f.gid, -1)); err != nil {
				return fmt.Errorf("set owner of %q: %w", p, err)
			}
		}
	}
	if err := os.WriteFile(filepath.Join(tsDir, "..hash"), []byte(sum), 0o644); err != nil {
		return err
	}
	if fsGroup != nil {
		if err := setVolumeOwnership(tsDir, *fsGroup, true); err != nil {
			return err
		}
	}
	tmp := filepath.Join(dir, "..data_tmp")
	_ = os.Remove(tmp)
	if err := os.Symlink(filepath.Base(tsDir), tmp); err != nil {
		return err
	}
	if err := os.Rename(tmp, dataLink); err != nil {
		return err
	}
	top := map[string]bool{}
	for _, p := range paths {
		first := strings.Split(filepath.Clean(p), string(filepath.Separator))[0]
		top[first] = true
		link := filepath.Join(dir, first)
		if _, err := os.Lstat(link); os.IsNotExist(err) {
			if err := os.Symlink(filepath.Join("..data", first), link); err != nil {
				return err
			}
		}
	}
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		if !strings.HasPrefix(e.Name(), "..") && !top[e.Name()] {
			_ = os.Remove(filepath.Join(dir, e.Name()))
		}
	}
	if old != "" && old != filepath.Base(tsDir) {
		_ = os.RemoveAll(filepath.Join(dir, old))
	}
	if fsGroup != nil {
		// The volume's directory and its links (..data and the top-level
		// entries); the payload was done before it was published.
		if err := changeOwnership(dir, *fsGroup, true); err != nil {
			return err
		}
		for _, name := range append([]string{"..data"}, sortedKeys(top)...) {
			if err := changeOwnership(filepath.Join(dir, name), *fsGroup, true); err != nil {
				return err
			}
		}
	}
	return nil
}

// podFSGroup is the pod's spec.securityContext.fsGroup, or nil.
func podFSGroup(pod *corev1.Pod) *int64 {
	if sc := pod.Spec.SecurityContext; sc != nil {
		return sc.FSGroup
	}
	return nil
}

// emptyDirReadyPath is the marker of an emptyDir volume set up: beside its
// directory, a name no volume has (names are DNS labels), removed with the
// pod's volumes.
func emptyDirReadyPath(dir string) string {
	return filepath.Join(filepath.Dir(dir), "."+filepath.Base(dir)+".ready")
}

// setVolumeOwnership gives everything under root (root included) the group
// fsGroup and group access, as the kubelet's volume ownership step
// (volume.SetVolumeOwnership) does for the volumes that support it: group
// read for a read-only volume's files (configMap, secret, downwardAPI,
// projected), read and write for a writable one's (emptyDir), and on
// directories group search and setgid, so that what is made in them
// inherits the group.
func setVolumeOwnership(root string, fsGroup int64, readOnly bool) error {
	return filepath.WalkDir(root, func(path string, _ fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		return changeOwnership(path, fsGroup, readOnly)
	})
}

// changeOwnership is setVolumeOwnership for one path; a link gets the
// group only.
func changeOwnership(path string, fsGroup int64, readOnly bool) error {
	if err := os.Lchown(path, -1, int(fsGroup)); err != nil {
		return fmt.Errorf("set group of %q to fsGroup %d: %w", path, fsGroup, err)
	}
	info, err := os.Lstat(path)
	if err != nil {
		return err
	}
	if info.Mode()&os.ModeSymlink != 0 {
		return nil
	}
	mask := os.FileMode(0o660)
	if readOnly {
		mask = 0o440
	}
	if info.IsDir() {
		mask |= os.ModeSetgid | 0o110
	}
	if err := os.Chmod(path, info.Mode()|mask); err != nil {
		return fmt.Errorf("set mode of %q for fsGroup %d: %w", path, fsGroup, err)
	}
	return nil
}

// idOr is *id, or def when id is nil.
func idOr(id *int64, def int) int {
	if id == nil {
		return def
	}
	return int(*id)
}

// unmountVolumes tears a pod's volumes down: tmpfs mounts are unmounted,
// directories removed, service account tokens forgotten. hostPath volumes
// are left alone.
func (k *Kubelet) unmountVolumes(uid types.UID) {
	k.tokens.Forget(uid)
	root := k.volumesDir(uid)
	plugins, _ := os.ReadDir(root)
	var mounts []string
	for _, p := range plugins {
		vols, _ := os.ReadDir(filepath.Join(root, p.Name()))
		for _, v := range vols {
			if path := filepath.Join(root, p.Name(), v.Name()); isMountPoint(path) {
				mounts = append(mounts, path)
			}
		}
	}
	sort.Strings(mounts)
	for _, m := range mounts {
		if err := unix.Unmount(m, unix.MNT_DETACH); err != nil {
			slog.Warn("unmount volume", "path", m, "err", err)
			return
		}
	}
	_ = os.RemoveAll(root)
}

// isMountPoint reports whether path is on another device than its parent.
func isMountPoint(path string) bool {
	var st, parent syscall.Stat_t
	if syscall.Lstat(path, &st) != nil || syscall.Lstat(filepath.Dir(path), &parent) != nil {
		return false
	}
	return st.Dev != parent.Dev
}
