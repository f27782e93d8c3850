package kubelet

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"syscall"
	"testing"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/skiff-sh/skiff/internal/kubelet/fakeruntime"
)

// TestTokenFile checks what a projected serviceAccountToken source asks
// the API server for and the mode and owner of the file it becomes.
func TestTokenFile(t *testing.T) {
	i64 := func(v int64) *int64 { return &v }
	i32 := func(v int32) *int32 { return &v }
	newPod := func(psc *corev1.PodSecurityContext, users ...*int64) *corev1.Pod {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: "web", UID: "pod-uid"},
			Spec: corev1.PodSpec{ServiceAccountName: "builder", SecurityContext: psc}}
		for _, u := range users {
			c := corev1.Container{Name: "c"}
			if u != nil {
				c.SecurityContext = &corev1.SecurityContext{RunAsUser: u}
			}
			p.Spec.Containers = append(p.Spec.Containers, c)
		}
		return p
	}
	tests := []struct {
		name     string
		pod      *corev1.Pod
		src      corev1.ServiceAccountTokenProjection
		defMode  *int32
		wantAuds []string
		wantMode os.FileMode
		wantUID  *int64
		wantGID  *int64
	}{
		{name: "kube-api-access defaults", pod: newPod(nil, nil), src: corev1.ServiceAccountTokenProjection{Path: "token", ExpirationSeconds: i64(3607)},
			defMode: i32(0o644), wantMode: 0o644},
		{name: "audience and the volume's mode", pod: newPod(nil, nil), src: corev1.ServiceAccountTokenProjection{Path: "vault-token", Audience: "vault", ExpirationSeconds: i64(600)},
			defMode: i32(0o440), wantAuds: []string{"vault"}, wantMode: 0o440},
		{name: "all containers as one user", pod: newPod(nil, i64(1000), i64(1000)), src: corev1.ServiceAccountTokenProjection{Path: "token", ExpirationSeconds: i64(3607)},
			defMode: i32(0o644), wantMode: 0o600, wantUID: i64(1000)},
		{name: "pod-level user", pod: newPod(&corev1.PodSecurityContext{RunAsUser: i64(2000)}, nil), src: corev1.ServiceAccountTokenProjection{Path: "token", ExpirationSeconds: i64(3607)},
			defMode: i32(0o644), wantMode: 0o600, wantUID: i64(2000)},
		{name: "containers as different users", pod: newPod(nil, i64(1000), i64(1001)), src: corev1.ServiceAccountTokenProjection{Path: "token", ExpirationSeconds: i64(3607)},
			defMode: i32(0o644), wantMode: 0o644},
		{name: "fsGroup", pod: newPod(&corev1.PodSecurityContext{FSGroup: i64(3000)}, nil), src: corev1.ServiceAccountTokenProjection{Path: "token", ExpirationSeconds: i64(3607)},
			defMode: i32(0o644), wantMode: 0o640, wantGID: i64(3000)},
		{name: "user and fsGroup", pod: newPod(&corev1.PodSecurityContext{RunAsUser: i64(1000), FSGroup: i64(3000)}, nil),
			src: corev1.ServiceAccountTokenProjection{Path: "token", ExpirationSeconds: i64(3607)}, defMode: i32(0o644), wantMode: 0o640, wantUID: i64(1000), wantGID: i64(3000)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cs := fake.NewClientset()
			var got *authenticationv1.TokenRequest
			var gotSA string
			cs.PrependReactor("create", "serviceaccounts", func(a k8stesting.Action) (bool, runtime.Object, error) {
				ca := a.(k8stesting.CreateAction)
				if a.GetSubresource() != "token" {
					return false, nil, nil
				}
				got = ca.GetObject().(*authenticationv1.TokenRequest).DeepCopy()
				gotSA = ca.(k8stesting.CreateActionImpl).Name
				out := got.DeepCopy()
				out.Status.Token = "signed"
				out.Status.ExpirationTimestamp = metav1.Now()
				return true, out, nil
			})
			rt := fakeruntime.New(fakeruntime.Options{})
			k, err := New(Config{NodeName: "n1", Client: cs, Runtime: rt, Images: rt, DataDir: t.TempDir()})
			if err != nil {
				t.Fatal(err)
			}
			files, err := k.tokenFile(context.Background(), tt.pod, &tt.src, tt.defMode)
			if err != nil {
				t.Fatal(err)
			}
			f, ok := files[tt.src.Path]
			if !ok || string(f.data) != "signed" {
				t.Fatalf("files = %v, want the token at %q", files, tt.src.Path)
			}
			if f.mode != tt.wantMode || !eqPtr(f.uid, tt.wantUID) || !eqPtr(f.gid, tt.wantGID) {
				t.Errorf("mode %o uid %v gid %v, want %o %v %v", f.mode, deref(f.uid), deref(f.gid), tt.wantMode, deref(tt.wantUID), deref(tt.wantGID))
			}
			ref := got.Spec.BoundObjectRef
			if gotSA != "builder" || ref == nil || ref.Kind != "Pod" || ref.APIVersion != "v1" || ref.Name != "web" || ref.UID != "pod-uid" ||
				!slices.Equal(got.Spec.Audiences, tt.wantAuds) || *got.Spec.ExpirationSeconds != *tt.src.ExpirationSeconds {
				t.Errorf("requested %s: %+v", gotSA, got.Spec)
			}
		})
	}
}

// TestWriteAtomicOwner checks that a file with an owner gets it.
func TestWriteAtomicOwner(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("changing owners needs root")
	}
	dir := t.TempDir()
	uid, gid := int64(1234), int64(5678)
	if err := writeAtomic(dir, map[string]file{"token": {data: []byte("t"), mode: 0o640, uid: &uid, gid: &gid}, "ca.crt": {data: []byte("c"), mode: 0o644}}, nil); err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string][3]uint32{"token": {0o640, 1234, 5678}, "ca.crt": {0o644, 0, 0}} {
		fi, err := os.Stat(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		st := fi.Sys().(*syscall.Stat_t)
		if got := [3]uint32{uint32(fi.Mode().Perm()), st.Uid, st.Gid}; got != want {
			t.Errorf("%s: mode, uid, gid = %o %d %d, want %o %d %d", name, got[0], got[1], got[2], want[0], want[1], want[2])
		}
	}
}

// TestWriteAtomicFSGroup: with the pod's fsGroup, a configMap, secret,
// downwardAPI or projected volume's files, directories and links get that
// group and group read, directories setgid and group search, as the
// kubelet's volume ownership step leaves them (a 0440 secret is readable
// by a non-root user in the group).
func TestWriteAtomicFSGroup(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("changing owners needs root")
	}
	dir := t.TempDir()
	group := int64(2001)
	files := map[string]file{
		"secret": {data: []byte("s"), mode: 0o400},
		"config": {data: []byte("c"), mode: 0o644},
		"sub/x":  {data: []byte("x"), mode: 0o600},
	}
	if err := writeAtomic(dir, files, &group); err != nil {
		t.Fatal(err)
	}
	// path: mode (with type bits setgid and dir), gid; Lstat for links.
	want := map[string]struct {
		mode os.FileMode
		link bool
	}{
		".":             {os.ModeDir | os.ModeSetgid | 0o755, false},
		"..data":        {0, true},
		"..data/":       {os.ModeDir | os.ModeSetgid | 0o755, false},
		"secret":        {0, true},
		"..data/secret": {0o440, false},
		"..data/config": {0o644, false},
		"..data/sub":    {os.ModeDir | os.ModeSetgid | 0o755, false},
		"..data/sub/x":  {0o640, false},
	}
	for name, w := range want {
		path := filepath.Join(dir, name)
		stat := os.Stat
		if w.link {
			stat = os.Lstat
		}
		if name == "..data/" {
			path += "/."
		}
		fi, err := stat(path)
		if err != nil {
			t.Fatal(err)
		}
		if gid := fi.Sys().(*syscall.Stat_t).Gid; gid != uint32(group) {
			t.Errorf("%s: gid %d, want %d", name, gid, group)
		}
		if !w.link && fi.Mode() != w.mode {
			t.Errorf("%s: mode %v, want %v", name, fi.Mode(), w.mode)
		}
	}
	data, err := os.ReadFile(filepath.Join(dir, "secret"))
	if err != nil || string(data) != "s" {
		t.Errorf("secret reads %q, %v", data, err)
	}

	// A writable volume (emptyDir): group read and write.
	empty := t.TempDir()
	if err := os.Chmod(empty, 0o777); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(empty, "made"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := setVolumeOwnership(empty, group, false); err != nil {
		t.Fatal(err)
	}
	for name, mode := range map[string]os.FileMode{".": os.ModeDir | os.ModeSetgid | 0o777, "made": 0o664} {
		fi, err := os.Stat(filepath.Join(empty, name))
		if err != nil {
			t.Fatal(err)
		}
		if gid := fi.Sys().(*syscall.Stat_t).Gid; gid != uint32(group) || fi.Mode() != mode {
			t.Errorf("emptyDir %s: mode %v gid %d, want %v %d", name, fi.Mode(), gid, mode, group)
		}
	}
}

func eqPtr(a, b *int64) bool { return (a == nil) == (b == nil) && (a == nil || *a == *b) }

func deref(p *int64) any {
	if p == nil {
		return nil
	}
	return *p
}

// TestEmptyDirSetUpOnce: an emptyDir is set up (mode, fsGroup) when the
// pod first syncs; what its containers make later keeps its mode on the
// syncs after, as with upstream's emptyDir, which marks itself ready (the
// ownership step ran on every sync and gave a file made 0644 group write).
func TestEmptyDirSetUpOnce(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("changing owners needs root")
	}
	k := &Kubelet{cfg: Config{DataDir: t.TempDir()}}
	group := int64(2001)
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "default", UID: "uid-1"},
		Spec: corev1.PodSpec{
			SecurityContext: &corev1.PodSecurityContext{FSGroup: &group},
			Volumes:         []corev1.Volume{{Name: "scratch", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}},
		},
	}
	v := &pod.Spec.Volumes[0]
	if err := k.mountVolume(context.Background(), pod, v); err != nil {
		t.Fatal(err)
	}
	dir, _ := k.volumePath(pod, "scratch")
	fi, err := os.Stat(dir)
	if err != nil {
		t.Fatal(err)
	}
	if want := os.ModeDir | os.ModeSetgid | 0o777; fi.Mode() != want || fi.Sys().(*syscall.Stat_t).Gid != uint32(group) {
		t.Fatalf("emptyDir: mode %v gid %d, want %v %d", fi.Mode(), fi.Sys().(*syscall.Stat_t).Gid, want, group)
	}
	made := filepath.Join(dir, "made")
	if err := os.WriteFile(made, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(made, 0o644); err != nil { // whatever the test's umask
		t.Fatal(err)
	}
	for range 2 {
		if err := k.mountVolume(context.Background(), pod, v); err != nil {
			t.Fatal(err)
		}
	}
	if fi, err := os.Stat(made); err != nil || fi.Mode() != 0o644 {
		t.Fatalf("a file made in the emptyDir after its set-up: %v, %v; want mode 0644", fi.Mode(), err)
	}
	// Removed by hand (ready marker left): set up again.
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	if err := k.mountVolume(context.Background(), pod, v); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(dir); err != nil || fi.Mode() != os.ModeDir|os.ModeSetgid|0o777 {
		t.Fatalf("emptyDir set up again: %v, %v", fi.Mode(), err)
	}
}
