package e2e

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"

	"github.com/skiff-sh/skiff/test/e2e/framework"
)

// TestKubectl runs kubectl's other everyday commands with each version,
// each version against a server of its own and each subtest in namespaces
// of its own.
func TestKubectl(t *testing.T) {
	for _, version := range kubectlVersions {
		t.Run("kubectl-"+version, func(t *testing.T) {
			s := framework.StartServer(t, framework.Options{})
			cs := s.Clientset(t)
			// First, while only the system namespaces exist.
			t.Run("namespaces", func(t *testing.T) { testNamespaces(t, newKubectl(t, s, version), cs) })
			t.Run("missing-namespace", func(t *testing.T) { testMissingNamespace(t, newKubectl(t, s, version), cs) })
			t.Run("explain", func(t *testing.T) { testExplain(t, newKubectl(t, s, version)) })
			t.Run("server-side-apply", func(t *testing.T) { testServerSideApply(t, newKubectl(t, s, version), cs) })
			t.Run("invalid-manifests", func(t *testing.T) { testInvalidManifests(t, newKubectl(t, s, version), cs) })
			t.Run("image-pull-policy", func(t *testing.T) { testImagePullPolicy(t, newKubectl(t, s, version)) })
		})
	}
}

// testNamespaces: the system namespaces exist; a namespace with content
// goes Terminating on delete, stays so while content remains, refuses new
// content, and disappears with its content.
func testNamespaces(t *testing.T, k kubectl, cs kubernetes.Interface) {
	ctx := framework.Context(t, 5*time.Minute)
	stdout := k.ok("get", "namespaces")
	rows := framework.ParseTable(stdout)
	if len(rows) == 0 || !reflect.DeepEqual(rows[0], []string{"NAME", "STATUS", "AGE"}) {
		t.Fatalf("get namespaces:\n%s\nwant header NAME STATUS AGE", stdout)
	}
	got := map[string]bool{}
	for _, row := range rows[1:] {
		checkRow(t, "get namespaces", row, []string{row[0], "Active", "AGE"})
		got[row[0]] = true
	}
	if want := map[string]bool{"default": true, "kube-system": true, "kube-public": true, "kube-node-lease": true}; !reflect.DeepEqual(got, want) {
		t.Errorf("get namespaces lists %v, want exactly %v", got, want)
	}

	const ns = "e2e-ns"
	k.expect("namespace/e2e-ns created", "create", "namespace", ns)
	created, err := cs.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(created.Spec.Finalizers, []corev1.FinalizerName{corev1.FinalizerKubernetes}) || created.Status.Phase != corev1.NamespaceActive {
		t.Errorf("new namespace: spec.finalizers %v, status.phase %q; want [kubernetes], Active", created.Spec.Finalizers, created.Status.Phase)
	}
	k.expect("configmap/cm1 created", "create", "configmap", "cm1", "--from-literal=k=v", "-n", ns)
	// A finalizer of ours on a second configmap holds the namespace in
	// Terminating until the test lets go.
	held := filepath.Join(t.TempDir(), "held.yaml")
	writeFile(t, held, "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: held\n  finalizers: [\"e2e.skiff.sh/hold\"]\ndata:\n  k: v\n")
	k.expect("configmap/held created", "apply", "-f", held, "-n", ns)
	podFile := filepath.Join(t.TempDir(), "my-pod.yaml")
	writeFile(t, podFile, myPod)
	k.expect("pod/my-pod created", "apply", "-f", podFile, "-n", ns)

	w, err := cs.CoreV1().Namespaces().Watch(ctx, metav1.ListOptions{FieldSelector: "metadata.name=" + ns, ResourceVersion: created.ResourceVersion})
	if err != nil {
		t.Fatalf("watch namespace %s: %v", ns, err)
	}
	defer w.Stop()

	k.expect(`namespace "e2e-ns" deleted`, "delete", "namespace", ns, "--wait=false")
	// The namespace controller deletes the content: cm1 and the pod go, the
	// held configmap gets a deletionTimestamp and stays.
	framework.WaitFor(t, 2*time.Minute, "the namespace controller to delete the namespace's content", func() (bool, error) {
		cms, err := cs.CoreV1().ConfigMaps(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		pods, err := cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		if len(pods.Items) != 0 || len(cms.Items) != 1 || cms.Items[0].Name != "held" || cms.Items[0].DeletionTimestamp == nil {
			return false, fmt.Errorf("%d pods, configmaps %v", len(pods.Items), cmSummary(cms.Items))
		}
		return true, nil
	})
	stdout = k.ok("get", "namespace", ns)
	if rows = framework.ParseTable(stdout); len(rows) != 2 || !reflect.DeepEqual(rows[0], []string{"NAME", "STATUS", "AGE"}) {
		t.Errorf("get namespace %s:\n%s\nwant header NAME STATUS AGE and one row", ns, stdout)
	} else {
		checkRow(t, "get namespace while content remains", rows[1], []string{ns, "Terminating", "AGE"})
	}
	stdout = k.ok("get", "namespaces")
	found := false
	for _, row := range framework.ParseTable(stdout)[1:] {
		if row[0] == ns {
			found = true
			checkRow(t, "get namespaces while e2e-ns has content", row, []string{ns, "Terminating", "AGE"})
		}
	}
	if !found {
		t.Errorf("get namespaces: no %s row while it has content:\n%s", ns, stdout)
	}
	k.expectError(`error: failed to create configmap: configmaps "cm2" is forbidden: unable to create new content in namespace e2e-ns because it is being terminated`,
		"create", "configmap", "cm2", "--from-literal=k=v", "-n", ns)

	k.expect("configmap/held patched", "patch", "configmap", "held", "-n", ns, "--type=json", "-p", `[{"op":"remove","path":"/metadata/finalizers"}]`)
	framework.WaitFor(t, 2*time.Minute, "namespace e2e-ns to disappear", func() (bool, error) {
		_, err := cs.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
		if err == nil {
			return false, nil
		}
		return isNotFound(err), err
	})
	k.expectError(`Error from server (NotFound): namespaces "e2e-ns" not found`, "get", "namespace", ns)
	// The API answers "configmaps "cm1" not found"; kubectl then looks the
	// namespace up and reports that instead.
	k.expectError(`Error from server (NotFound): namespaces "e2e-ns" not found`, "get", "configmap", "cm1", "-n", ns)
	for _, name := range []string{"cm1", "held"} {
		_, err := cs.CoreV1().ConfigMaps(ns).Get(ctx, name, metav1.GetOptions{})
		if want := `configmaps "` + name + `" not found`; !isNotFound(err) || err.Error() != want {
			t.Errorf("get configmap %s/%s after the namespace went: %v, want NotFound %q", ns, name, err, want)
		}
	}
	stdout, stderr, err := k.run("get", "configmaps", "-n", ns)
	if err != nil || stdout != "" || stderr != "No resources found in e2e-ns namespace.\n" {
		t.Errorf("get configmaps -n %s: err %v, stdout %q, stderr %q; want only %q on stderr", ns, err, stdout, stderr, "No resources found in e2e-ns namespace.\n")
	}

	// The watch saw Terminating, then the deletion.
	sawTerminating := false
	timeout := time.After(time.Minute)
	for done := false; !done; {
		select {
		case ev, ok := <-w.ResultChan():
			if !ok {
				t.Fatalf("namespace watch closed before the DELETED event")
			}
			nsObj, isNS := ev.Object.(*corev1.Namespace)
			if !isNS {
				t.Fatalf("namespace watch: %s event with %T: %+v", ev.Type, ev.Object, ev.Object)
			}
			switch ev.Type {
			case watch.Modified:
				if nsObj.Status.Phase == corev1.NamespaceTerminating && nsObj.DeletionTimestamp != nil {
					sawTerminating = true
				}
			case watch.Deleted:
				done = true
			}
		case <-timeout:
			t.Fatalf("no DELETED event for namespace %s within a minute", ns)
		}
	}
	if !sawTerminating {
		t.Errorf("namespace watch: no MODIFIED event with phase Terminating and a deletionTimestamp before DELETED")
	}
}

func cmSummary(cms []corev1.ConfigMap) string {
	var parts []string
	for _, cm := range cms {
		parts = append(parts, fmt.Sprintf("%s(deleting=%v)", cm.Name, cm.DeletionTimestamp != nil))
	}
	return "[" + strings.Join(parts, " ") + "]"
}

// testMissingNamespace: creating in a namespace that does not exist.
func testMissingNamespace(t *testing.T, k kubectl, cs kubernetes.Interface) {
	podFile := filepath.Join(t.TempDir(), "my-pod.yaml")
	writeFile(t, podFile, myPod)
	k.expectError(`error: failed to create configmap: namespaces "nope" not found`, "create", "configmap", "x", "--from-literal=a=b", "-n", "nope")
	k.expectError(fmt.Sprintf(`Error from server (NotFound): error when creating %q: namespaces "nope" not found`, podFile), "apply", "-f", podFile, "-n", "nope")
	k.expectError(`Error from server (NotFound): namespaces "nope" not found`, "get", "namespace", "nope")
	// Reads do not check the namespace, as in Kubernetes: a get by name is
	// the object's NotFound (kubectl then looks the namespace up and reports
	// that instead), a list is empty.
	k.expectError(`Error from server (NotFound): namespaces "nope" not found`, "get", "pod", "my-pod", "-n", "nope")
	_, err := cs.CoreV1().Pods("nope").Get(framework.Context(t, time.Minute), "my-pod", metav1.GetOptions{})
	if want := `pods "my-pod" not found`; !isNotFound(err) || err.Error() != want {
		t.Errorf("get pod nope/my-pod through client-go: %v, want NotFound %q", err, want)
	}
	stdout, stderr, err := k.run("get", "pods", "-n", "nope")
	if err != nil || stdout != "" || stderr != "No resources found in nope namespace.\n" {
		t.Errorf("get pods -n nope: err %v, stdout %q, stderr %q; want only %q on stderr", err, stdout, stderr, "No resources found in nope namespace.\n")
	}
}

// testExplain: kubectl explain reads the field's schema from the server.
func testExplain(t *testing.T, k kubectl) {
	stdout := k.ok("explain", "pod.spec.containers")
	for _, re := range []string{
		`(?m)^KIND:\s+Pod$`,
		`(?m)^VERSION:\s+v1$`,
		`(?m)^FIELD:\s+containers <\[\]Container>$`,
		`(?m)^DESCRIPTION:$`,
		`(?m)^\s+List of containers belonging to the pod\.`,
		`(?m)^FIELDS:$`,
		`(?m)^  image\s+<string>$`,
		`(?m)^  name\s+<string> -required-$`,
		`(?m)^  ports\s+<\[\]ContainerPort>$`,
	} {
		if !regexp.MustCompile(re).MatchString(stdout) {
			t.Errorf("explain pod.spec.containers: no match for %s in:\n%s", re, stdout)
		}
	}
	stdout = k.ok("explain", "pods")
	for _, re := range []string{`(?m)^KIND:\s+Pod$`, `(?m)^VERSION:\s+v1$`, `(?m)^  spec\s+<PodSpec>$`, `(?m)^  status\s+<PodStatus>$`} {
		if !regexp.MustCompile(re).MatchString(stdout) {
			t.Errorf("explain pods: no match for %s in:\n%s", re, stdout)
		}
	}
}

// testServerSideApply: apply --server-side creates, updates, and reports
// a conflict with another field manager unless forced.
func testServerSideApply(t *testing.T, k kubectl, cs kubernetes.Interface) {
	ctx := framework.Context(t, 5*time.Minute)
	const ns = "ssa"
	k.expect("namespace/ssa created", "create", "namespace", ns)
	dir := t.TempDir()
	file := filepath.Join(dir, "ssa-pod.yaml")
	manifest := `apiVersion: v1
kind: Pod
metadata:
  name: ssa-pod
  labels:
    app: ssa
spec:
  containers:
  - name: busybox
    image: busybox:1.36
`
	writeFile(t, file, manifest)
	k.expect("pod/ssa-pod serverside-applied", "apply", "--server-side", "-f", file, "-n", ns)
	pod, err := cs.CoreV1().Pods(ns).Get(ctx, "ssa-pod", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if pod.Spec.Containers[0].ImagePullPolicy != corev1.PullIfNotPresent || pod.Status.Phase != corev1.PodPending {
		t.Errorf("server-side applied pod not defaulted: imagePullPolicy %q, phase %q", pod.Spec.Containers[0].ImagePullPolicy, pod.Status.Phase)
	}
	checkManager(t, pod, "kubectl", metav1.ManagedFieldsOperationApply)

	writeFile(t, file, strings.Replace(manifest, "    app: ssa\n", "    app: ssa\n    tier: one\n", 1))
	k.expect("pod/ssa-pod serverside-applied", "apply", "--server-side", "-f", file, "-n", ns)
	pod, err = cs.CoreV1().Pods(ns).Get(ctx, "ssa-pod", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if want := map[string]string{"app": "ssa", "tier": "one"}; !reflect.DeepEqual(pod.Labels, want) {
		t.Errorf("labels after the second apply: %v, want %v", pod.Labels, want)
	}

	other := filepath.Join(dir, "other.yaml")
	writeFile(t, other, "apiVersion: v1\nkind: Pod\nmetadata:\n  name: ssa-pod\n  labels:\n    tier: two\n")
	_, stderr := k.fail("apply", "--server-side", "--field-manager=other", "-f", other, "-n", ns)
	framework.MustContain(t, "conflicting apply", stderr,
		`error: Apply failed with 1 conflict: conflict with "kubectl": .metadata.labels.tier`,
		"Please review the fields above--they currently have other managers.")
	pod, err = cs.CoreV1().Pods(ns).Get(ctx, "ssa-pod", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if pod.Labels["tier"] != "one" {
		t.Errorf("label tier=%q after a refused apply, want one", pod.Labels["tier"])
	}

	k.expect("pod/ssa-pod serverside-applied", "apply", "--server-side", "--field-manager=other", "--force-conflicts", "-f", other, "-n", ns)
	pod, err = cs.CoreV1().Pods(ns).Get(ctx, "ssa-pod", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if want := map[string]string{"app": "ssa", "tier": "two"}; !reflect.DeepEqual(pod.Labels, want) {
		t.Errorf("labels after the forced apply: %v, want %v", pod.Labels, want)
	}
	checkManager(t, pod, "other", metav1.ManagedFieldsOperationApply)
}

// checkManager fails unless manager has a managedFields entry with op.
func checkManager(t *testing.T, pod *corev1.Pod, manager string, op metav1.ManagedFieldsOperationType) {
	t.Helper()
	for _, mf := range pod.ManagedFields {
		if mf.Manager == manager && mf.Operation == op {
			return
		}
	}
	var got []string
	for _, mf := range pod.ManagedFields {
		got = append(got, mf.Manager+"/"+string(mf.Operation))
	}
	t.Errorf("pod %s: no managedFields entry %s/%s; have %v", pod.Name, manager, op, got)
}

// testInvalidManifests: the API server rejects bad pods with Kubernetes'
// error texts, and stores nothing.
func testInvalidManifests(t *testing.T, k kubectl, cs kubernetes.Interface) {
	ctx := framework.Context(t, 5*time.Minute)
	const ns = "invalid"
	k.expect("namespace/invalid created", "create", "namespace", ns)
	dir := t.TempDir()
	pod := func(name, spec string) string {
		return "apiVersion: v1\nkind: Pod\nmetadata:\n  name: " + name + "\nspec:\n" + spec
	}
	containers := "  containers:\n  - name: busybox\n    image: busybox:1.36\n"
	for _, tc := range []struct {
		name     string
		manifest string
		// want is stderr without its newline; wantParts, when set, are
		// substrings of stderr instead.
		want      string
		wantParts []string
	}{
		{
			name:     "no-containers",
			manifest: pod("no-containers", "  containers: []\n"),
			want:     `The Pod "no-containers" is invalid: spec.containers: Required value`,
		},
		{
			name:     "bad-name",
			manifest: pod("My_Pod", containers),
			want: `The Pod "My_Pod" is invalid: metadata.name: Invalid value: "My_Pod": a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', ` +
				`and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')`,
		},
		{
			name:     "unknown-field",
			manifest: pod("unknown-field", containers+"  foo: bar\n"),
			want:     `Error from server (BadRequest): error when creating "FILE": Pod in version "v1" cannot be handled as a Pod: strict decoding error: unknown field "spec.foo"`,
		},
		{
			name:     "wrong-type",
			manifest: pod("wrong-type", "  containers: x\n"),
			wantParts: []string{
				`Error from server (BadRequest): error when creating "FILE": Pod in version "v1" cannot be handled as a Pod: `,
				`cannot unmarshal string into Go struct field PodSpec.spec.containers of type []v1.Container`,
			},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			k := newKubectl(t, k.s, k.version)
			file := filepath.Join(dir, tc.name+".yaml")
			writeFile(t, file, tc.manifest)
			if tc.wantParts == nil {
				k.expectError(strings.ReplaceAll(tc.want, "FILE", file), "apply", "-f", file, "-n", ns)
			} else {
				stdout, stderr := k.fail("apply", "-f", file, "-n", ns)
				if stdout != "" {
					t.Errorf("apply -f %s: unexpected stdout %q", file, stdout)
				}
				for _, part := range tc.wantParts {
					framework.MustContain(t, "apply -f "+file, stderr, strings.ReplaceAll(part, "FILE", file))
				}
			}
		})
	}
	pods, err := cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(pods.Items) != 0 {
		t.Errorf("invalid manifests left %d pods behind", len(pods.Items))
	}
}

// testImagePullPolicy: imagePullPolicy defaults from the image reference
// (Always for :latest or no tag, IfNotPresent otherwise) unless given.
func testImagePullPolicy(t *testing.T, k kubectl) {
	const ns = "pull"
	k.expect("namespace/pull created", "create", "namespace", ns)
	want := []struct {
		name, image, policy string
		explicit            bool
	}{
		{"pull-tagged", "busybox:1.36", "IfNotPresent", false},
		{"pull-latest", "busybox:latest", "Always", false},
		{"pull-untagged", "busybox", "Always", false},
		{"pull-registry-port", "127.0.0.1:5000/busybox", "Always", false},
		{"pull-digest", "busybox@sha256:" + strings.Repeat("ab", 32), "IfNotPresent", false},
		{"pull-never", "busybox:latest", "Never", true},
	}
	var docs, created []string
	for _, w := range want {
		doc := fmt.Sprintf("apiVersion: v1\nkind: Pod\nmetadata:\n  name: %s\nspec:\n  containers:\n  - name: c\n    image: %s\n", w.name, w.image)
		if w.explicit {
			doc += "    imagePullPolicy: " + w.policy + "\n"
		}
		docs = append(docs, doc)
		created = append(created, "pod/"+w.name+" created")
	}
	file := filepath.Join(t.TempDir(), "pull.yaml")
	writeFile(t, file, strings.Join(docs, "---\n"))
	k.expect(strings.Join(created, "\n"), "apply", "-f", file, "-n", ns)

	stdout := k.ok("get", "pods", "-n", ns, "-o", "json")
	var list corev1.PodList
	if err := json.Unmarshal([]byte(stdout), &list); err != nil {
		t.Fatalf("get pods -o json: %v\n%s", err, stdout)
	}
	got := map[string]string{}
	for _, p := range list.Items {
		got[p.Name] = string(p.Spec.Containers[0].ImagePullPolicy)
	}
	for _, w := range want {
		if got[w.name] != w.policy {
			t.Errorf("pod %s (image %s): imagePullPolicy %q, want %q", w.name, w.image, got[w.name], w.policy)
		}
	}
}
