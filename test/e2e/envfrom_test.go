package e2e

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/skiff-sh/skiff/test/e2e/framework"
)

// testEnvFrom: a ConfigMap's and a Secret's keys become the container's
// environment through envFrom, with and without a prefix, names that are
// not shell identifiers ("data-1") included, as the conformance specs
// "ConfigMap should be consumable via the environment" want. The process
// is `env` itself: a shell would drop such names from its children's
// environment.
func (e *podsEnv) testEnvFrom(t *testing.T) {
	const ns = "envfrom"
	k := newKubectl(t, e.s.Server, "1.33")
	e.namespace(t, k, ns)
	ctx := framework.Context(t, 5*time.Minute)
	if _, err := e.cs.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "settings"},
		Data:       map[string]string{"data-1": "value-1", "LEVEL": "debug"},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.cs.CoreV1().Secrets(ns).Create(ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "creds"},
		Data:       map[string][]byte{"pass.word": []byte("s3cret")},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "env"},
		Spec: corev1.PodSpec{
			NodeName:      e.node,
			RestartPolicy: corev1.RestartPolicyNever,
			Containers: []corev1.Container{{Name: "env", Image: e.image, Command: []string{"env"},
				EnvFrom: []corev1.EnvFromSource{
					{ConfigMapRef: &corev1.ConfigMapEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "settings"}}},
					{Prefix: "p-", ConfigMapRef: &corev1.ConfigMapEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "settings"}}},
					{SecretRef: &corev1.SecretEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "creds"}}},
				}}},
		},
	}
	e.createPod(ctx, t, ns, pod)
	if p := e.podEnded(ctx, t, ns, "env"); p.Status.Phase == corev1.PodFailed {
		t.Fatalf("env pod failed: %+v", p.Status)
	}
	out := k.ok("logs", "-n", ns, "env")
	for _, want := range []string{"data-1=value-1", "LEVEL=debug", "p-data-1=value-1", "p-LEVEL=debug", "pass.word=s3cret"} {
		if !strings.Contains(out, "\n"+want+"\n") && !strings.HasPrefix(out, want+"\n") {
			t.Errorf("environment lacks %q:\n%s", want, out)
		}
	}
}
