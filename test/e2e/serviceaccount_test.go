package e2e

import (
	"fmt"
	"strings"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/skiff-sh/skiff/test/e2e/framework"
)

// saDir is where the ServiceAccount admission plugin mounts a pod's
// kube-api-access volume.
const saDir = "/var/run/secrets/kubernetes.io/serviceaccount"

// testServiceAccountToken runs a pod as a non-root user that prints the
// files of its service account volume (token, ca.crt, namespace, with
// their mode and owner), then authenticates with that token from the host
// as kubectl auth whoami does.
func (e *podsEnv) testServiceAccountToken(t *testing.T) {
	const ns = "sa-token"
	k := newKubectl(t, e.s.Server, "1.33")
	e.namespace(t, k, ns)
	ctx := framework.Context(t, 5*time.Minute)
	script := fmt.Sprintf(`d=%s; for f in token namespace ca.crt; do echo "== $f $(stat -L -c '%%a %%u' $d/$f)"; cat $d/$f; echo; done; echo "== end"`, saDir)
	user := int64(1000)
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "reader"},
		Spec: corev1.PodSpec{
			NodeName:        e.node,
			RestartPolicy:   corev1.RestartPolicyNever,
			SecurityContext: &corev1.PodSecurityContext{RunAsUser: &user},
			Containers:      []corev1.Container{{Name: "reader", Image: e.image, Command: []string{"sh", "-c", script}}},
		},
	}
	// The default ServiceAccount comes from a controller: until it exists
	// the ServiceAccount admission plugin refuses pods, as on
	// kube-apiserver, so a client retries.
	created := e.createPod(ctx, t, ns, pod)
	if p := e.podEnded(ctx, t, ns, "reader"); p.Status.Phase == corev1.PodFailed {
		t.Fatalf("reader failed: %+v", p.Status)
	}
	raw, err := e.cs.CoreV1().Pods(ns).GetLogs("reader", &corev1.PodLogOptions{}).DoRaw(ctx)
	if err != nil {
		t.Fatalf("logs of reader: %v", err)
	}
	files, modes := parseSections(string(raw))
	if _, ok := files["end"]; !ok {
		t.Fatalf("reader's output is cut short:\n%s", raw)
	}
	// Mode and owner as the kubelet leaves them for a pod whose containers
	// all run as one user.
	for name, want := range map[string]string{"token": "600 1000", "namespace": "644 0", "ca.crt": "644 0"} {
		if modes[name] != want {
			t.Errorf("%s: mode and owner %q, want %q", name, modes[name], want)
		}
	}
	if files["namespace"] != ns {
		t.Errorf("namespace file = %q, want %q", files["namespace"], ns)
	}
	if files["ca.crt"] != strings.TrimSpace(string(e.s.CAData(t))) {
		t.Errorf("ca.crt file is not the cluster CA:\n%s", files["ca.crt"])
	}

	// The pod's token, from the host: who it is, and that it reaches the API.
	token := files["token"]
	cs, err := kubernetes.NewForConfig(&rest.Config{Host: e.s.URL, BearerToken: token, TLSClientConfig: rest.TLSClientConfig{CAData: e.s.CAData(t)}})
	if err != nil {
		t.Fatal(err)
	}
	review, err := cs.AuthenticationV1().SelfSubjectReviews().Create(ctx, &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("SelfSubjectReview with the pod's token: %v", err)
	}
	me := review.Status.UserInfo
	if me.Username != "system:serviceaccount:"+ns+":default" || !strings.Contains(strings.Join(me.Groups, ","), "system:serviceaccounts:"+ns) {
		t.Errorf("the pod's token is %q in %v, want system:serviceaccount:%s:default", me.Username, me.Groups, ns)
	}
	if got := me.Extra["authentication.kubernetes.io/pod-name"]; len(got) != 1 || got[0] != "reader" {
		t.Errorf("the pod's token is bound to %v, want pod reader", got)
	}
	if got := me.Extra["authentication.kubernetes.io/pod-uid"]; len(got) != 1 || got[0] != string(created.UID) {
		t.Errorf("the pod's token is bound to uid %v, want %s", got, created.UID)
	}
	// RBAC: the default service account may do nothing until a Role
	// lets it read pods; then it reads pods, and nothing else.
	if _, err := cs.CoreV1().Pods(ns).Get(ctx, "reader", metav1.GetOptions{}); !apierrors.IsForbidden(err) {
		t.Errorf("get the pod with its own token and no binding: %v, want 403", err)
	}
	k.ok("create", "role", "pod-reader", "-n", ns, "--verb=get,list,watch", "--resource=pods")
	k.ok("create", "rolebinding", "default-reads-pods", "-n", ns, "--role=pod-reader", "--serviceaccount="+ns+":default")
	framework.WaitFor(t, 30*time.Second, "the token to list pods", func() (bool, error) {
		_, err := cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		return err == nil, err
	})
	if _, err := cs.CoreV1().Pods(ns).Get(ctx, "reader", metav1.GetOptions{}); err != nil {
		t.Errorf("get the pod with its own token: %v", err)
	}
	for what, err := range map[string]error{
		"list secrets":             func() error { _, err := cs.CoreV1().Secrets(ns).List(ctx, metav1.ListOptions{}); return err }(),
		"delete the pod":           cs.CoreV1().Pods(ns).Delete(ctx, "reader", metav1.DeleteOptions{}),
		"list pods of kube-system": func() error { _, err := cs.CoreV1().Pods("kube-system").List(ctx, metav1.ListOptions{}); return err }(),
	} {
		if !apierrors.IsForbidden(err) {
			t.Errorf("%s with the pod's token: %v, want 403", what, err)
		}
	}
}

// parseSections splits "== <name> <mode> <owner>" sections: their bodies
// (trimmed) and their "<mode> <owner>" by name.
func parseSections(out string) (bodies, modes map[string]string) {
	bodies, modes = map[string]string{}, map[string]string{}
	var name string
	var body strings.Builder
	flush := func() {
		if name != "" {
			bodies[name] = strings.TrimSpace(body.String())
		}
		body.Reset()
	}
	for _, line := range strings.SplitAfter(out, "\n") {
		if rest, ok := strings.CutPrefix(line, "== "); ok {
			flush()
			f := strings.Fields(rest)
			name = f[0]
			modes[name] = strings.Join(f[1:], " ")
			continue
		}
		body.WriteString(line)
	}
	flush()
	return bodies, modes
}
