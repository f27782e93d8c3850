package e2e

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"github.com/skiff-sh/skiff/internal/kubelet/cri/ociimage"
	"github.com/skiff-sh/skiff/internal/kubelet/cri/testimages"
	"github.com/skiff-sh/skiff/internal/pki"
	"github.com/skiff-sh/skiff/test/e2e/framework"
)

// testAdmissionWebhook: a validating admission webhook served by a pod
// behind a Service, as operators deploy theirs. The webhook
// (testdata/admissionwebhook, built here into an image of one static
// binary) serves TLS with a certificate for wh.<namespace>.svc; the
// configuration names the Service and trusts its CA. The server reaches
// the pod and applies its answer: kubectl shows the denial in Kubernetes'
// words, and what the webhook allows is stored.
func (e *podsEnv) testAdmissionWebhook(t *testing.T) {
	const ns = "webhook"
	ctx := framework.Context(t, 4*time.Minute)
	k := newKubectl(t, e.s.Server, "1.33")
	e.namespace(t, k, ns)

	ca := e.podBehindService(t, k, ns, "wh", "admissionwebhook", nil, nil)

	configs := e.cs.AdmissionregistrationV1().ValidatingWebhookConfigurations()
	if _, err := configs.Create(ctx, &admissionregistrationv1.ValidatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: "e2e-deny-forbidden"},
		Webhooks: []admissionregistrationv1.ValidatingWebhook{{
			Name: "deny.skiff.e2e",
			ClientConfig: admissionregistrationv1.WebhookClientConfig{
				Service:  &admissionregistrationv1.ServiceReference{Namespace: ns, Name: "wh", Path: ptr.To("/validate"), Port: ptr.To[int32](443)},
				CABundle: ca.CertPEM,
			},
			Rules: []admissionregistrationv1.RuleWithOperations{{
				Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create},
				Rule:       admissionregistrationv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"configmaps"}},
			}},
			NamespaceSelector:       &metav1.LabelSelector{MatchLabels: map[string]string{corev1.LabelMetadataName: ns}},
			FailurePolicy:           ptr.To(admissionregistrationv1.Fail),
			SideEffects:             ptr.To(admissionregistrationv1.SideEffectClassNone),
			AdmissionReviewVersions: []string{"v1"},
		}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := configs.Delete(framework.Context(t, time.Minute), "e2e-deny-forbidden", metav1.DeleteOptions{}); err != nil {
			t.Errorf("cleanup: %v", err)
		}
	})

	// The server's admission plugin learns of the configuration through
	// its informer: until then a forbidden ConfigMap is stored (and
	// removed again here).
	want := `error: failed to create configmap: admission webhook "deny.skiff.e2e" denied the request: the key forbidden is not allowed`
	framework.WaitFor(t, time.Minute, "the webhook's denial", func() (bool, error) {
		stdout, stderr, err := k.run("create", "configmap", "bad", "-n", ns, "--from-literal=forbidden=1")
		if err == nil {
			k.ok("delete", "configmap", "bad", "-n", ns)
			return false, nil
		}
		return strings.TrimSpace(stderr) == want, fmt.Errorf("stdout %q stderr %q", stdout, stderr)
	})
	k.expect("configmap/good created", "create", "configmap", "good", "-n", ns, "--from-literal=allowed=1")
}

// podBehindService runs testdata/<program>, built here into an image of
// one static binary, as pod name in ns, serving TLS on 8443 with a pair
// for <name>.<ns>.svc mounted at /certs (and volumes at mounts), behind
// Service name on port 443, as operators deploy webhooks and extension
// API servers; it returns once the pod is ready and the Service has its
// endpoint, with the CA that signed the pair.
func (e *podsEnv) podBehindService(t *testing.T, k kubectl, ns, name, program string, volumes []corev1.Volume, mounts []corev1.VolumeMount) *pki.CA {
	t.Helper()
	ctx := framework.Context(t, 4*time.Minute)
	image := programImage(t, e.registry, program)
	dir := t.TempDir()
	ca, err := pki.EnsureCA(filepath.Join(dir, "ca"))
	if err != nil {
		t.Fatal(err)
	}
	certFile, keyFile, err := ca.EnsureServingCert(filepath.Join(dir, "serving"), program, []string{name + "." + ns + ".svc"})
	if err != nil {
		t.Fatal(err)
	}
	k.expect("secret/"+name+"-certs created", "create", "secret", "tls", name+"-certs", "-n", ns, "--cert", certFile, "--key", keyFile)

	labels := map[string]string{"app": name}
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels},
		Spec: corev1.PodSpec{
			NodeName: e.node,
			Containers: []corev1.Container{{
				Name: program, Image: image,
				Ports:        []corev1.ContainerPort{{ContainerPort: 8443}},
				VolumeMounts: append([]corev1.VolumeMount{{Name: "certs", MountPath: "/certs", ReadOnly: true}}, mounts...),
				ReadinessProbe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{
					Path: "/healthz", Port: intstr.FromInt32(8443), Scheme: corev1.URISchemeHTTPS}}, PeriodSeconds: 1},
			}},
			Volumes: append([]corev1.Volume{{Name: "certs", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: name + "-certs"}}}}, volumes...),
		},
	}
	if _, err := e.cs.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.cs.CoreV1().Services(ns).Create(ctx, &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec:       corev1.ServiceSpec{Selector: labels, Ports: []corev1.ServicePort{{Port: 443, TargetPort: intstr.FromInt32(8443)}}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	framework.WaitFor(t, 2*time.Minute, "pod "+name+" ready", func() (bool, error) {
		p, err := e.cs.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		for _, c := range p.Status.Conditions {
			if c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue {
				return true, nil
			}
		}
		return false, fmt.Errorf("phase %s, containers %+v", p.Status.Phase, p.Status.ContainerStatuses)
	})
	waitEndpoints(t, e.cs, ns, name, 1)
	return ca
}

// programImage pushes the image of testdata/<program> (buildProgramImage)
// to registry and returns its reference.
func programImage(t *testing.T, registry *testimages.Registry, program string) string {
	t.Helper()
	image, err := registry.Push(framework.Context(t, 2*time.Minute), program, "e2e", buildProgramImage(t, program))
	if err != nil {
		t.Fatal(err)
	}
	return image
}

// buildProgramImage builds testdata/<program> into a static binary, the
// one file and command of the image it returns.
func buildProgramImage(t *testing.T, program string) *ociimage.Image {
	t.Helper()
	bin := filepath.Join(t.TempDir(), program)
	build := exec.Command("go", "build", "-o", bin, "./testdata/"+program)
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build %s: %v\n%s", program, err, out)
	}
	data, err := os.ReadFile(bin)
	if err != nil {
		t.Fatal(err)
	}
	img, err := ociimage.Build(ociimage.Spec{Arch: runtime.GOARCH, Gzip: true, Cmd: []string{"/" + program},
		Files: []ociimage.File{{Path: program, Mode: 0o755, Data: data}}})
	if err != nil {
		t.Fatal(err)
	}
	return img
}
