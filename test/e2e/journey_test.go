package e2e

import (
	"encoding/json"
	"errors"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"github.com/skiff-sh/skiff/test/e2e/framework"
)

// myPod is the seed's pod: one busybox container, no node to run on yet.
const myPod = `apiVersion: v1
kind: Pod
metadata:
  name: my-pod
  labels:
    app: my-app
spec:
  containers:
  - name: busybox
    image: busybox:1.36
    command: ["sh", "-c", "echo Hello from my-pod && sleep 3600"]
`

// myPodEdited is myPod with one more label.
var myPodEdited = strings.Replace(myPod, "    app: my-app\n", "    app: my-app\n    tier: demo\n", 1)

// ageRE matches kubectl's AGE column (5s, 3m2s, 10m, 2d3h …).
var ageRE = regexp.MustCompile(`^[0-9]+[smhdy]([0-9]+[smh])?$`)

// TestPodJourney walks the seed's commands with each kubectl version, each
// against a server of its own: apply, get (table, wide, yaml, json, name,
// watch), describe, events, delete.
func TestPodJourney(t *testing.T) {
	for _, version := range kubectlVersions {
		t.Run("kubectl-"+version, func(t *testing.T) {
			s := framework.StartServer(t, framework.Options{})
			cs := s.Clientset(t)
			ctx := framework.Context(t, 10*time.Minute)
			podFile := filepath.Join(t.TempDir(), "my-pod.yaml")
			writeFile(t, podFile, myPod)

			t.Run("apply", func(t *testing.T) {
				k := newKubectl(t, s, version)
				k.expect("pod/my-pod created", "apply", "-f", podFile)
				k.expect("pod/my-pod unchanged", "apply", "-f", podFile)
				writeFile(t, podFile, myPodEdited)
				k.expect("pod/my-pod configured", "apply", "-f", podFile)

				pod, err := cs.CoreV1().Pods("default").Get(ctx, "my-pod", metav1.GetOptions{})
				if err != nil {
					t.Fatalf("get my-pod through client-go: %v", err)
				}
				if want := map[string]string{"app": "my-app", "tier": "demo"}; !reflect.DeepEqual(pod.Labels, want) {
					t.Errorf("labels after the edit: %v, want %v", pod.Labels, want)
				}
				last := pod.Annotations[corev1.LastAppliedConfigAnnotation]
				if !strings.Contains(last, `"tier":"demo"`) {
					t.Errorf("annotation %s = %q, want the edited manifest", corev1.LastAppliedConfigAnnotation, last)
				}
			})

			t.Run("get", func(t *testing.T) {
				k := newKubectl(t, s, version)
				stdout, stderr, err := k.run("get", "pods")
				if err != nil || stderr != "" {
					t.Fatalf("get pods: err %v, stderr %q", err, stderr)
				}
				rows := framework.ParseTable(stdout)
				wantHeader := []string{"NAME", "READY", "STATUS", "RESTARTS", "AGE"}
				if len(rows) != 2 || !reflect.DeepEqual(rows[0], wantHeader) {
					t.Fatalf("get pods:\n%s\nwant header %q and one row", stdout, wantHeader)
				}
				checkRow(t, "get pods", rows[1], []string{"my-pod", "0/1", "Pending", "0", "AGE"})

				stdout = k.ok("get", "pods", "-o", "wide")
				rows = framework.ParseTable(stdout)
				wantHeader = []string{"NAME", "READY", "STATUS", "RESTARTS", "AGE", "IP", "NODE", "NOMINATED NODE", "READINESS GATES"}
				if len(rows) != 2 || !reflect.DeepEqual(rows[0], wantHeader) {
					t.Fatalf("get pods -o wide:\n%s\nwant header %q and one row", stdout, wantHeader)
				}
				checkRow(t, "get pods -o wide", rows[1], []string{"my-pod", "0/1", "Pending", "0", "AGE", "<none>", "<none>", "<none>", "<none>"})

				// One pod by name: the same table.
				stdout = k.ok("get", "pod", "my-pod")
				rows = framework.ParseTable(stdout)
				if len(rows) != 2 || !reflect.DeepEqual(rows[0], []string{"NAME", "READY", "STATUS", "RESTARTS", "AGE"}) {
					t.Errorf("get pod my-pod:\n%s\nwant header NAME READY STATUS RESTARTS AGE and one row", stdout)
				} else {
					checkRow(t, "get pod my-pod", rows[1], []string{"my-pod", "0/1", "Pending", "0", "AGE"})
				}

				// Label columns come from the object metadata in each row.
				stdout = k.ok("get", "pods", "--show-labels")
				rows = framework.ParseTable(stdout)
				if len(rows) != 2 || !reflect.DeepEqual(rows[0], []string{"NAME", "READY", "STATUS", "RESTARTS", "AGE", "LABELS"}) {
					t.Errorf("get pods --show-labels:\n%s\nwant header NAME READY STATUS RESTARTS AGE LABELS and one row", stdout)
				} else {
					checkRow(t, "get pods --show-labels", rows[1], []string{"my-pod", "0/1", "Pending", "0", "AGE", "app=my-app,tier=demo"})
				}
				stdout = k.ok("get", "pods", "-L", "app,tier")
				rows = framework.ParseTable(stdout)
				if len(rows) != 2 || !reflect.DeepEqual(rows[0], []string{"NAME", "READY", "STATUS", "RESTARTS", "AGE", "APP", "TIER"}) {
					t.Errorf("get pods -L app,tier:\n%s\nwant header NAME READY STATUS RESTARTS AGE APP TIER and one row", stdout)
				} else {
					checkRow(t, "get pods -L app,tier", rows[1], []string{"my-pod", "0/1", "Pending", "0", "AGE", "my-app", "demo"})
				}
				k.expect("pod/my-pod", "get", "pods", "-l", "tier=demo", "-o", "name")

				k.expect("pod/my-pod", "get", "pods", "-o", "name")
				k.expect("pod/my-pod", "get", "pod", "my-pod", "-o", "name")

				stdout = k.ok("get", "pod", "my-pod", "-o", "json")
				var pod corev1.Pod
				if err := json.Unmarshal([]byte(stdout), &pod); err != nil {
					t.Fatalf("get pod -o json: %v\n%s", err, stdout)
				}
				checkDefaultedPod(t, "get pod my-pod -o json", &pod)

				stdout = k.ok("get", "pod", "my-pod", "-o", "yaml")
				var fromYAML corev1.Pod
				if err := yaml.UnmarshalStrict([]byte(stdout), &fromYAML); err != nil {
					t.Fatalf("get pod -o yaml: %v\n%s", err, stdout)
				}
				checkDefaultedPod(t, "get pod my-pod -o yaml", &fromYAML)
				if fromYAML.UID != pod.UID || fromYAML.ResourceVersion != pod.ResourceVersion {
					t.Errorf("-o yaml uid/resourceVersion %s/%s, -o json %s/%s", fromYAML.UID, fromYAML.ResourceVersion, pod.UID, pod.ResourceVersion)
				}
				if !strings.HasPrefix(stdout, "apiVersion: v1\nkind: Pod\nmetadata:\n") {
					t.Errorf("get pod -o yaml starts %q, want apiVersion, kind, metadata first", firstLines(stdout, 3))
				}

				stdout = k.ok("get", "pods", "-o", "json")
				var list corev1.PodList
				if err := json.Unmarshal([]byte(stdout), &list); err != nil {
					t.Fatalf("get pods -o json: %v\n%s", err, stdout)
				}
				if list.Kind != "List" || list.APIVersion != "v1" || len(list.Items) != 1 || list.Items[0].Name != "my-pod" || list.Items[0].Kind != "Pod" {
					t.Errorf("get pods -o json: kind %q apiVersion %q items %d, want a v1 List with my-pod (kind Pod)", list.Kind, list.APIVersion, len(list.Items))
				}
			})

			t.Run("watch", func(t *testing.T) {
				k := newKubectl(t, s, version)
				if _, err := cs.CoreV1().Pods("default").Get(ctx, "my-pod", metav1.GetOptions{}); err != nil {
					t.Fatalf("nothing to watch: get my-pod: %v", err)
				}
				// --output-watch-events names each change, so the line the
				// label causes is told apart from the initial listing.
				w := s.KubectlBackground(t, version, "get", "pods", "-w", "--output-watch-events")
				header := w.WaitLine(t, 30*time.Second, "the table header", func(string) bool { return true })
				if got, want := framework.ParseTable(header)[0], []string{"EVENT", "NAME", "READY", "STATUS", "RESTARTS", "AGE"}; !reflect.DeepEqual(got, want) {
					t.Errorf("watch header %q, want %q", got, want)
				}
				first := w.WaitLine(t, 30*time.Second, "the my-pod row", func(string) bool { return true })
				checkRow(t, "get pods -w, first row", framework.ParseTable(first)[0], []string{"ADDED", "my-pod", "0/1", "Pending", "0", "AGE"})

				k.expect("pod/my-pod labeled", "label", "pod", "my-pod", "watched=yes")
				changed := w.WaitLine(t, 30*time.Second, "a new my-pod row", func(string) bool { return true })
				checkRow(t, "get pods -w, row after label", framework.ParseTable(changed)[0], []string{"MODIFIED", "my-pod", "0/1", "Pending", "0", "AGE"})
				pod, err := cs.CoreV1().Pods("default").Get(ctx, "my-pod", metav1.GetOptions{})
				if err != nil || pod.Labels["watched"] != "yes" {
					t.Errorf("after kubectl label: labels %v, err %v; want watched=yes", podLabels(pod), err)
				}
				if exited, err := w.Exited(); exited {
					t.Errorf("kubectl get -w exited by itself: %v; stderr %q", err, w.Stderr())
				}
				if err := w.Stop(10 * time.Second); errors.Is(err, framework.ErrKilled) {
					t.Errorf("stop kubectl get -w: %v", err)
				}
				if stderr := w.Stderr(); stderr != "" {
					t.Errorf("kubectl get -w stderr: %q", stderr)
				}
			})

			// Two events about my-pod, as a kubelet or the scheduler would
			// write them; describe and get events must show them.
			t.Run("describe", func(t *testing.T) {
				k := newKubectl(t, s, version)
				pod, err := cs.CoreV1().Pods("default").Get(ctx, "my-pod", metav1.GetOptions{})
				if err != nil {
					t.Fatal(err)
				}
				// Seen at distinct times, in an order unlike their names', so
				// sorting by lastTimestamp is observable.
				now := time.Now()
				createEvent(t, cs, pod, "my-pod.e2e-greeting", "E2EGreeting", "hello from the e2e test", now.Add(-3*time.Minute))
				createEvent(t, cs, pod, "my-pod.e2e-farewell", "E2EFarewell", "goodbye from the e2e test", now.Add(-2*time.Minute))
				// An event about another object must not show up.
				other := pod.DeepCopy()
				other.Name, other.UID = "other-pod", "00000000-0000-0000-0000-000000000000"
				createEvent(t, cs, other, "aaa-other-pod.e2e", "E2EOther", "about another pod", now.Add(-time.Minute))

				stdout := k.ok("describe", "pod", "my-pod")
				for _, re := range []string{
					`(?m)^Name:\s+my-pod$`,
					`(?m)^Namespace:\s+default$`,
					`(?m)^Node:\s+<none>$`,
					`(?m)^Labels:\s+app=my-app$`,
					`(?m)^Status:\s+Pending$`,
					`(?m)^Containers:$`,
					`(?m)^  busybox:$`,
					`(?m)^    Image:\s+busybox:1.36$`,
					`(?m)^QoS Class:\s+BestEffort$`,
					`(?m)^Events:$`,
					`(?m)^  Type\s+Reason\s+Age\s+From\s+Message$`,
					`(?m)^  Normal\s+E2EGreeting\s+\S+\s+e2e-test\s+hello from the e2e test$`,
					`(?m)^  Normal\s+E2EFarewell\s+\S+\s+e2e-test\s+goodbye from the e2e test$`,
				} {
					if !regexp.MustCompile(re).MatchString(stdout) {
						t.Errorf("describe pod my-pod: no match for %s in:\n%s", re, stdout)
					}
				}
				if strings.Contains(stdout, "E2EOther") {
					t.Errorf("describe pod my-pod shows another pod's event:\n%s", stdout)
				}
			})

			t.Run("events", func(t *testing.T) {
				k := newKubectl(t, s, version)
				stdout, stderr, err := k.run("get", "events", "--sort-by=.metadata.creationTimestamp")
				if err != nil || stderr != "" {
					t.Fatalf("get events: err %v, stderr %q", err, stderr)
				}
				rows := framework.ParseTable(stdout)
				wantHeader := []string{"LAST SEEN", "TYPE", "REASON", "OBJECT", "MESSAGE"}
				if len(rows) == 0 || !reflect.DeepEqual(rows[0], wantHeader) {
					t.Fatalf("get events:\n%s\nwant header %q", stdout, wantHeader)
				}
				want := map[string][]string{
					"E2EGreeting": {"AGE", "Normal", "E2EGreeting", "pod/my-pod", "hello from the e2e test"},
					"E2EFarewell": {"AGE", "Normal", "E2EFarewell", "pod/my-pod", "goodbye from the e2e test"},
					"E2EOther":    {"AGE", "Normal", "E2EOther", "pod/other-pod", "about another pod"},
				}
				for _, row := range rows[1:] {
					if len(row) != len(wantHeader) || !ageRE.MatchString(row[0]) {
						t.Errorf("get events: malformed row %q", row)
						continue
					}
					if w, ours := want[row[2]]; ours {
						checkRow(t, "get events", row, w)
						delete(want, row[2])
					} else {
						// Events the server's own components wrote.
						t.Logf("get events: other event %q", row)
					}
				}
				for reason := range want {
					t.Errorf("get events: no %s row in:\n%s", reason, stdout)
				}

				stdout = k.ok("get", "events", "--sort-by=.lastTimestamp")
				var order []string
				for _, row := range framework.ParseTable(stdout)[1:] {
					if len(row) > 2 && strings.HasPrefix(row[2], "E2E") {
						order = append(order, row[2])
					}
				}
				if want := []string{"E2EGreeting", "E2EFarewell", "E2EOther"}; !reflect.DeepEqual(order, want) {
					t.Errorf("get events --sort-by=.lastTimestamp: our events in order %q, want %q:\n%s", order, want, stdout)
				}
			})

			t.Run("delete", func(t *testing.T) {
				k := newKubectl(t, s, version)
				k.expect(`pod "my-pod" deleted`, "delete", "pod", "my-pod")
				k.expectError(`Error from server (NotFound): pods "my-pod" not found`, "get", "pod", "my-pod")
				stdout, stderr, err := k.run("get", "pods")
				if err != nil || stdout != "" || stderr != "No resources found in default namespace.\n" {
					t.Errorf("get pods after delete: err %v, stdout %q, stderr %q; want only %q on stderr", err, stdout, stderr, "No resources found in default namespace.\n")
				}
			})
		})
	}
}

// checkRow compares a table row with want; "AGE" in want matches any age.
func checkRow(t *testing.T, what string, got, want []string) {
	t.Helper()
	if len(got) != len(want) {
		t.Errorf("%s: row %q, want %q", what, got, want)
		return
	}
	for i := range want {
		if want[i] == "AGE" {
			if !ageRE.MatchString(got[i]) {
				t.Errorf("%s: column %d %q is not an age; row %q", what, i, got[i], got)
			}
			continue
		}
		if got[i] != want[i] {
			t.Errorf("%s: row %q, want %q", what, got, want)
			return
		}
	}
}

// checkDefaultedPod checks my-pod as the API server stores it: identity,
// defaults and initial status.
func checkDefaultedPod(t *testing.T, what string, pod *corev1.Pod) {
	t.Helper()
	errorf := func(format string, args ...any) { t.Helper(); t.Errorf(what+": "+format, args...) }
	if pod.Kind != "Pod" || pod.APIVersion != "v1" {
		errorf("kind %q apiVersion %q, want Pod v1", pod.Kind, pod.APIVersion)
	}
	if pod.Name != "my-pod" || pod.Namespace != "default" {
		errorf("name %s/%s, want default/my-pod", pod.Namespace, pod.Name)
	}
	if pod.UID == "" || pod.ResourceVersion == "" || pod.CreationTimestamp.IsZero() {
		errorf("uid %q resourceVersion %q creationTimestamp %v: want all set", pod.UID, pod.ResourceVersion, pod.CreationTimestamp)
	}
	if pod.Status.Phase != corev1.PodPending {
		errorf("status.phase %q, want Pending", pod.Status.Phase)
	}
	if pod.Status.QOSClass != corev1.PodQOSBestEffort {
		errorf("status.qosClass %q, want BestEffort", pod.Status.QOSClass)
	}
	if pod.Spec.NodeName != "" {
		errorf("spec.nodeName %q, want none", pod.Spec.NodeName)
	}
	if pod.Spec.RestartPolicy != corev1.RestartPolicyAlways {
		errorf("spec.restartPolicy %q, want Always", pod.Spec.RestartPolicy)
	}
	if pod.Spec.DNSPolicy != corev1.DNSClusterFirst {
		errorf("spec.dnsPolicy %q, want ClusterFirst", pod.Spec.DNSPolicy)
	}
	if pod.Spec.SchedulerName != corev1.DefaultSchedulerName {
		errorf("spec.schedulerName %q, want %s", pod.Spec.SchedulerName, corev1.DefaultSchedulerName)
	}
	if g := pod.Spec.TerminationGracePeriodSeconds; g == nil || *g != 30 {
		errorf("spec.terminationGracePeriodSeconds %v, want 30", g)
	}
	if pod.Spec.SecurityContext == nil {
		errorf("spec.securityContext unset, want {}")
	}
	if len(pod.Spec.Containers) != 1 {
		errorf("%d containers, want 1", len(pod.Spec.Containers))
		return
	}
	c := pod.Spec.Containers[0]
	if c.Name != "busybox" || c.Image != "busybox:1.36" {
		errorf("container %s image %s, want busybox busybox:1.36", c.Name, c.Image)
	}
	if c.ImagePullPolicy != corev1.PullIfNotPresent {
		errorf("containers[0].imagePullPolicy %q, want IfNotPresent for a tagged image", c.ImagePullPolicy)
	}
	if c.TerminationMessagePath != corev1.TerminationMessagePathDefault || c.TerminationMessagePolicy != corev1.TerminationMessageReadFile {
		errorf("containers[0] termination message %q/%q, want %s/File", c.TerminationMessagePath, c.TerminationMessagePolicy, corev1.TerminationMessagePathDefault)
	}
	if want := []string{"sh", "-c", "echo Hello from my-pod && sleep 3600"}; !reflect.DeepEqual(c.Command, want) {
		errorf("containers[0].command %q, want %q", c.Command, want)
	}
}

func firstLines(s string, n int) string {
	lines := strings.SplitN(s, "\n", n+1)
	if len(lines) > n {
		lines = lines[:n]
	}
	return strings.Join(lines, "\n")
}

func podLabels(p *corev1.Pod) map[string]string {
	if p == nil {
		return nil
	}
	return p.Labels
}
