package e2e

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/skiff-sh/skiff/test/e2e/framework"
)

// testFSGroupVolumes: a pod running as a user that is not root, with an
// fsGroup, reads a secret of mode 0440 and a configMap from its volumes,
// and what it makes in an emptyDir takes the fsGroup: the kubelet gives
// the volumes the pod's group, as upstream's volume ownership step does
// (the conformance specs "Secrets should be consumable from pods in
// volume as non-root with defaultMode and fsGroup set").
func (e *podsEnv) testFSGroupVolumes(t *testing.T) {
	const ns = "fsgroup"
	k := newKubectl(t, e.s.Server, "1.33")
	e.namespace(t, k, ns)
	ctx := framework.Context(t, 5*time.Minute)
	if _, err := e.cs.CoreV1().Secrets(ns).Create(ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "creds"},
		Data:       map[string][]byte{"password": []byte("s3cret")},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.cs.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "settings"},
		Data:       map[string]string{"level": "debug"},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	user, group, mode := int64(1000), int64(1001), int32(0o440)
	// The file made in the emptyDir keeps the mode it was made with (664
	// in two CI runs of 2026-12-06: the kubelet gave the emptyDir's files
	// group write again on every sync, after the container had made it;
	// the script's umask is the runtime's default, set to be sure).
	script := `for f in /secret/password /config/level; do echo "== $f $(stat -L -c '%a %u %g' $f)"; cat $f; echo; done
umask 022; echo made > /scratch/made; echo "== /scratch $(stat -c '%a %u %g' /scratch)"; echo "== /scratch/made $(stat -c '%a %u %g' /scratch/made)"; echo "== end"`
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "reader"},
		Spec: corev1.PodSpec{
			NodeName:        e.node,
			RestartPolicy:   corev1.RestartPolicyNever,
			SecurityContext: &corev1.PodSecurityContext{RunAsUser: &user, FSGroup: &group},
			Containers: []corev1.Container{{Name: "reader", Image: e.image, Command: []string{"sh", "-c", script},
				VolumeMounts: []corev1.VolumeMount{{Name: "secret", MountPath: "/secret"}, {Name: "config", MountPath: "/config"}, {Name: "scratch", MountPath: "/scratch"}}}},
			Volumes: []corev1.Volume{
				{Name: "secret", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "creds", DefaultMode: &mode}}},
				{Name: "config", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: "settings"}}}},
				{Name: "scratch", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
			},
		},
	}
	e.createPod(ctx, t, ns, pod)
	status := e.podEnded(ctx, t, ns, "reader").Status
	raw, err := e.cs.CoreV1().Pods(ns).GetLogs("reader", &corev1.PodLogOptions{}).DoRaw(ctx)
	if err != nil {
		t.Fatalf("logs of reader: %v", err)
	}
	if status.Phase != corev1.PodSucceeded {
		t.Fatalf("reader ended %s; its output:\n%s", status.Phase, raw)
	}
	files, modes := parseSections(string(raw))
	if _, ok := files["end"]; !ok {
		t.Fatalf("reader's output is cut short:\n%s", raw)
	}
	for name, want := range map[string]string{
		"/secret/password": "440 0 1001",
		"/config/level":    "644 0 1001",
		"/scratch":         "2777 0 1001",
		"/scratch/made":    "644 1000 1001",
	} {
		if modes[name] != want {
			t.Errorf("%s: mode, owner and group %q, want %q", name, modes[name], want)
		}
	}
	if files["/secret/password"] != "s3cret" || files["/config/level"] != "debug" {
		t.Errorf("the volumes read %q and %q", files["/secret/password"], files["/config/level"])
	}
}
