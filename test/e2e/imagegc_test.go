package e2e

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/skiff-sh/skiff/internal/kubelet/cri"
	"github.com/skiff-sh/skiff/internal/kubelet/cri/testimages"
	"github.com/skiff-sh/skiff/test/e2e/framework"
)

// TestImageGC runs a node whose image garbage collection thresholds are
// always exceeded (high 1%, low 0%: no real disk is that empty), with a
// 5-second minimum image age checked every second. An image in use stays;
// once its pod is deleted the image goes, the pause image stays, the Node
// gets a Warning FreeDiskSpaceFailed event (0% cannot be reached), and a
// new pod pulls the image again and runs.
func TestImageGC(t *testing.T) {
	_, image := testimages.NewTestRegistry(t)
	s := framework.StartAgentServer(t, framework.Options{ExtraArgs: []string{
		"--image-gc-high-threshold=1", "--image-gc-low-threshold=0",
		"--image-minimum-gc-age=5s", "--image-gc-period=1s",
	}})
	cs := s.Clientset(t)
	criClient := s.CRI(t)
	k := newKubectl(t, s.Server, "1.33")
	ctx := framework.Context(t, 5*time.Minute)
	const ns = "default"
	pod := podManifest{Name: "gc", Node: s.Node.Name, Image: image,
		Command: []string{"sh", "-c", "trap 'exit 0' TERM; sleep 3600 & wait"}}.yaml()

	hasImage := func(ref string) bool {
		t.Helper()
		resp, err := criClient.Images.ImageStatus(ctx, &runtimeapi.ImageSpec{Image: ref}, false)
		if err != nil {
			t.Fatalf("image status %s: %v", ref, err)
		}
		return resp.GetImage() != nil
	}
	waitRunning := func() {
		t.Helper()
		framework.WaitFor(t, runningTimeout, "pod gc Running", func() (bool, error) {
			p, err := cs.CoreV1().Pods(ns).Get(ctx, "gc", metav1.GetOptions{})
			if err != nil {
				return false, err
			}
			return p.Status.Phase == corev1.PodRunning, nil
		})
	}

	applyManifests(t, k, ns, pod)
	waitRunning()
	// Several collections pass while the pod runs: its image stays.
	time.Sleep(8 * time.Second)
	if !hasImage(image) {
		t.Fatalf("image %s was collected while a running container uses it", image)
	}

	k.ok("delete", "pod", "gc", "--grace-period=1")
	framework.WaitFor(t, 2*time.Minute, "image "+image+" collected once unused", func() (bool, error) {
		return !hasImage(image), nil
	})
	if !hasImage(cri.PauseImage) {
		t.Errorf("the pause image %s was collected", cri.PauseImage)
	}

	var ev corev1.Event
	framework.WaitFor(t, time.Minute, "FreeDiskSpaceFailed event on the node", func() (bool, error) {
		evs, err := cs.CoreV1().Events("").List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.kind=Node,reason=FreeDiskSpaceFailed"})
		if err != nil {
			return false, err
		}
		for _, e := range evs.Items {
			if e.InvolvedObject.Name == s.Node.Name {
				ev = e
				return true, nil
			}
		}
		return false, nil
	})
	if ev.Type != corev1.EventTypeWarning || !strings.HasPrefix(ev.Message, "Failed to garbage collect required amount of images. Attempted to free ") {
		t.Errorf("event: %s %s %q", ev.Type, ev.Reason, ev.Message)
	}
	out := k.ok("get", "events", "-A", "--field-selector", "involvedObject.kind=Node,reason=FreeDiskSpaceFailed")
	framework.MustContain(t, "kubectl get events", out, "Warning", "FreeDiskSpaceFailed", "node/"+s.Node.Name, "Failed to garbage collect required amount of images")

	// The image is pulled again for a new pod.
	framework.WaitFor(t, deleteTimeout, "pod gc deleted", func() (bool, error) {
		_, err := cs.CoreV1().Pods(ns).Get(ctx, "gc", metav1.GetOptions{})
		return isNotFound(err), nil
	})
	applyManifests(t, k, ns, pod)
	waitRunning()
	p, err := cs.CoreV1().Pods(ns).Get(ctx, "gc", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	evs, err := cs.CoreV1().Events(ns).List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.uid=" + string(p.UID) + ",reason=Pulled"})
	if err != nil {
		t.Fatal(err)
	}
	if len(evs.Items) != 1 || !strings.HasPrefix(evs.Items[0].Message, "Successfully pulled image ") {
		t.Errorf("Pulled events of the second pod: %+v, want one pull", evs.Items)
	}
}
