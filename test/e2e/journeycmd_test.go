package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/skiff-sh/skiff/internal/journey"
	"github.com/skiff-sh/skiff/internal/kubelet/cri/testimages"
	"github.com/skiff-sh/skiff/test/e2e/framework"
)

// journeyOutput is `skiff journey -o json`'s output.
type journeyOutput struct {
	Diagnosis string         `json:"diagnosis"`
	Headline  string         `json:"headline"`
	Fallback  []string       `json:"fallback"`
	Steps     []journey.Step `json:"steps"`
}

// example reads a manifest of examples/ with its images made local:
// busybox:1.36 becomes the test registry's, and the typo ngnix:1.25 names
// an image that registry does not have.
func (e *podsEnv) example(t *testing.T, name string) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("..", "..", "examples", name))
	if err != nil {
		t.Fatal(err)
	}
	registry, _, _ := strings.Cut(e.image, "/")
	m := strings.ReplaceAll(string(data), "image: busybox:1.36", "image: "+e.image)
	return strings.ReplaceAll(m, "image: ngnix:1.25", "image: "+registry+"/ngnix:1.25")
}

// journeyJSON runs `skiff journey pod/NAME -n NS -o json` and decodes it.
func (e *podsEnv) journeyJSON(t *testing.T, ns, name string) journeyOutput {
	t.Helper()
	stdout, stderr, err := e.s.SkiffJourney(t, "pod/"+name, "-n", ns, "-o", "json")
	if err != nil {
		t.Fatalf("skiff journey pod/%s: %v\n%s%s", name, err, stdout, stderr)
	}
	var out journeyOutput
	if err := json.Unmarshal([]byte(stdout), &out); err != nil {
		t.Fatalf("skiff journey -o json: %v\n%s", err, stdout)
	}
	return out
}

// testJourneyCommand is the issue's `skiff journey`: the examples'
// pods, applied with kubectl, each tell their story.
func (e *podsEnv) testJourneyCommand(t *testing.T) {
	const ns = "journey"
	k := newKubectl(t, e.s.Server, "1.33")
	e.namespace(t, k, ns)
	dir := t.TempDir()
	for _, f := range []string{"my-pod.yaml", "unschedulable-pod.yaml", "bad-image-pod.yaml", "crashloop-pod.yaml"} {
		writeFile(t, filepath.Join(dir, f), e.example(t, f))
	}
	applied := time.Now()
	k.ok("apply", "-n", ns, "-f", filepath.Join(dir, "my-pod.yaml"))
	k.ok("wait", "-n", ns, "--for=condition=Ready", "pod/my-pod", "--timeout=120s")
	observed := time.Since(applied)
	for _, f := range []string{"unschedulable-pod.yaml", "bad-image-pod.yaml", "crashloop-pod.yaml"} {
		k.ok("apply", "-n", ns, "-f", filepath.Join(dir, f))
	}

	t.Run("running", func(t *testing.T) {
		out := e.journeyJSON(t, ns, "my-pod")
		if out.Diagnosis != "" || len(out.Fallback) > 0 {
			t.Errorf("a Running pod: diagnosis %q, fallback %q; want neither", out.Diagnosis, out.Fallback)
		}
		// Every step of the seed's story, in its order (Pulled either
		// after Pulling or, the image present already, alone).
		milestones := []string{"Accepted", "Stored", "Popped", "Bound", "Seen", "SandboxReady", "Pulled", "Created", "Started", "Running", "Ready"}
		next, step := 0, 0
		var accepted, running time.Time
		var sum time.Duration
		for i, s := range out.Steps {
			if i > 0 {
				d := s.Time.Sub(out.Steps[i-1].Time)
				if d < 0 {
					t.Errorf("step %d (%s) is %v before the one it follows", i, s.What, -d)
				}
				if running.IsZero() {
					sum += d
				}
			}
			if s.Step < step {
				t.Errorf("step %s is step %d after step %d: out of the story's order", s.What, s.Step, step)
			}
			step = s.Step
			if next < len(milestones) && s.What == milestones[next] {
				next++
			}
			switch s.What {
			case "Accepted":
				accepted = s.Time
				if !regexp.MustCompile(`^create by [^ ,]+,`).MatchString(s.Detail) {
					t.Errorf("Accepted does not say who asked: %q", s.Detail)
				}
			case "Stored":
				if !regexp.MustCompile(`revision [0-9]+`).MatchString(s.Detail) {
					t.Errorf("Stored without a revision: %q", s.Detail)
				}
			case "Bound":
				if !strings.Contains(s.Detail, "bound to "+e.node) || !strings.Contains(s.Detail, "nodes feasible") {
					t.Errorf("Bound detail %q, want the node and the feasible count", s.Detail)
				}
			case "SandboxReady":
				if !regexp.MustCompile(`pod IP [0-9.]+`).MatchString(s.Detail) {
					t.Errorf("SandboxReady without the pod IP: %q", s.Detail)
				}
			case "Running":
				running = s.Time
			}
		}
		if next != len(milestones) {
			t.Errorf("steps reach %d of %d milestones (missing %s onward): %+v", next, len(milestones), milestones[min(next, len(milestones)-1)], out.Steps)
		}
		if accepted.IsZero() || running.IsZero() {
			t.Fatalf("no Accepted or Running step: %+v", out.Steps)
		}
		// The durations add up to the apply-to-Running time, which is
		// shorter than what the test itself saw from apply to Ready.
		if total := running.Sub(accepted); sum != total || total <= 0 || total > observed {
			t.Errorf("durations add up to %v; apply to Running %v; the test saw %v from apply to Ready", sum, total, observed)
		}
		if !strings.Contains(out.Headline, "apply to Running") {
			t.Errorf("headline %q", out.Headline)
		}

		// The table, as a user reads it: one row a step, each with +PREV.
		table, stderr, err := e.s.SkiffJourney(t, "pod/my-pod", "-n", ns)
		if err != nil {
			t.Fatalf("skiff journey: %v\n%s", err, stderr)
		}
		framework.MustContain(t, "skiff journey pod/my-pod", table, "pod "+ns+"/my-pod on "+e.node+": Running, Ready; apply to Running",
			"STEP  COMPONENT", "api-server", "etcd", "scheduler", "kubelet on "+e.node)
		if rows := regexp.MustCompile(`(?m)^[1-6] +.* \+[0-9.]+(ms|s|µs)  `).FindAllString(table, -1); len(rows) != len(out.Steps)-1 {
			t.Errorf("%d rows with +PREV, want %d:\n%s", len(rows), len(out.Steps)-1, table)
		}

		// kubectl's plugin: the same story through `kubectl journey`.
		plugins := t.TempDir()
		if stdout, stderr, err := e.s.SkiffJourney(t, "--install-kubectl-plugin", plugins); err != nil {
			t.Fatalf("install the plugin: %v\n%s%s", err, stdout, stderr)
		}
		stdout, stderr, err := e.s.KubectlPlugin(t, "1.33", plugins, "journey", "pod/my-pod", "-n", ns)
		if err != nil {
			t.Fatalf("kubectl journey: %v\n%s%s", err, stdout, stderr)
		}
		framework.MustContain(t, "kubectl journey pod/my-pod", stdout, "pod "+ns+"/my-pod on "+e.node+": Running, Ready", "Accepted", "Ready")
	})

	t.Run("unschedulable", func(t *testing.T) {
		var out journeyOutput
		framework.WaitFor(t, time.Minute, "too-big's diagnosis", func() (bool, error) {
			out = e.journeyJSON(t, ns, "too-big")
			return strings.Contains(out.Diagnosis, "Insufficient memory"), nil
		})
		want := regexp.MustCompile(`^waiting at step 4 \(scheduler\): 0/1 nodes are available: 1 Insufficient memory — needs 1Ti memory, most free [0-9.]+[KMGT]i on ` +
			regexp.QuoteMeta(e.node) + `; retried when .*a node's allocatable resources change`)
		if !want.MatchString(out.Diagnosis) {
			t.Errorf("diagnosis %q, want it to match %s", out.Diagnosis, want)
		}
	})

	t.Run("bad-image", func(t *testing.T) {
		var out journeyOutput
		framework.WaitFor(t, time.Minute, "typo's diagnosis", func() (bool, error) {
			out = e.journeyJSON(t, ns, "typo")
			return strings.Contains(out.Diagnosis, "not found"), nil
		})
		want := regexp.MustCompile(`^waiting at step 5 \(kubelet on ` + regexp.QuoteMeta(e.node) + `\): image "[^"]+/ngnix:1.25" not found \((ErrImagePull|ImagePullBackOff)\); next pull (in [0-9]+s|now)$`)
		if !want.MatchString(out.Diagnosis) {
			t.Errorf("diagnosis %q, want it to match %s", out.Diagnosis, want)
		}
	})

	t.Run("crash-loop", func(t *testing.T) {
		var out journeyOutput
		framework.WaitFor(t, 90*time.Second, "crasher's diagnosis", func() (bool, error) {
			out = e.journeyJSON(t, ns, "crasher")
			return strings.Contains(out.Diagnosis, "CrashLoopBackOff"), nil
		})
		want := regexp.MustCompile(`^waiting at step 6 \(kubelet on ` + regexp.QuoteMeta(e.node) + `\): container "app" exited with code 3 \(Error\) and was restarted [0-9]+ times \(CrashLoopBackOff\); next start (in [0-9]+s|now)$`)
		if !want.MatchString(out.Diagnosis) {
			t.Errorf("diagnosis %q, want it to match %s", out.Diagnosis, want)
		}
		exited := false
		for _, s := range out.Steps {
			exited = exited || (s.What == "Exited" && strings.Contains(s.Detail, "exited with code 3"))
		}
		if !exited {
			t.Errorf("no Exited step with the exit code: %+v", out.Steps)
		}
	})

	t.Run("summary", func(t *testing.T) {
		stdout, stderr, err := e.s.SkiffJourney(t, "--summary", "-n", ns, "--since", "10m")
		if err != nil {
			t.Fatalf("skiff journey --summary: %v\n%s", err, stderr)
		}
		total := regexp.MustCompile(`(?m)^total: apply to Running +([0-9]+) +[0-9.]+(ms|s|µs) +[0-9.]+(ms|s|µs)$`).FindStringSubmatch(stdout)
		if total == nil || total[1] == "0" {
			t.Errorf("summary without an apply-to-Running row of at least one pod:\n%s", stdout)
		}
		framework.MustContain(t, "summary", stdout, "SEGMENT", "P50", "P99", "Accepted → Stored", "Bound → Seen")
	})
}

// testImagesImport imports an image tarball into the running node with
// `skiff images import` and runs a pod from it with no registry.
func (e *podsEnv) testImagesImport(t *testing.T) {
	const ns, image = "imported", "example.com/imported/busybox:1"
	archive := busyboxArchive(t, image)
	stdout, stderr, err := e.s.Skiff(t, "images", "import", archive)
	if err != nil {
		t.Fatalf("skiff images import: %v\n%s%s", err, stdout, stderr)
	}
	framework.MustContain(t, "skiff images import", stdout, "imported "+archive+" into the node")

	k := newKubectl(t, e.s.Server, "1.33")
	e.namespace(t, k, ns)
	applyManifests(t, k, ns, podManifest{Name: "from-tarball", Image: image, Command: []string{"sleep", "3600"},
		ContainerExtra: "    imagePullPolicy: Never\n"}.yaml())
	k.ok("wait", "-n", ns, "--for=condition=Ready", "pod/from-tarball", "--timeout=120s")

	// A file that is no image archive is refused before it reaches the node.
	if _, stderr, err := e.s.Skiff(t, "images", "import", filepath.Join(t.TempDir(), "notes.txt")); err == nil || !strings.Contains(stderr, "ends in .tar, .tar.gz or .tgz") {
		t.Errorf("importing notes.txt: %v, stderr %q; want a refusal naming the suffixes", err, stderr)
	}
}

// testDashboard opens `skiff dashboard` in headless Chromium, creates a
// pod and watches the open page show it appear, reach Running and draw
// its journey, then keeps a screenshot.
func (e *podsEnv) testDashboard(t *testing.T) {
	const ns, name = "dashboard", "dash-pod"
	url := e.s.StartDashboard(t)
	b := framework.StartBrowser(t)
	b.Navigate(t, url+"/#pod="+ns+"/"+name)
	b.WaitText(t, 30*time.Second, "the page's live feed", `document.getElementById("live").textContent`,
		func(s string) bool { return strings.HasPrefix(s, "live") })
	if pods := b.Eval(t, `document.getElementById("pods").innerText`); strings.Contains(pods, name) {
		t.Fatalf("%s listed before it exists:\n%s", name, pods)
	}
	b.WaitText(t, 30*time.Second, "the node with its allocation", `document.getElementById("nodes").innerText`,
		func(s string) bool { return strings.Contains(s, e.node) && strings.Contains(s, "Ready") })

	k := newKubectl(t, e.s.Server, "1.33")
	e.namespace(t, k, ns)
	applyManifests(t, k, ns, podManifest{Name: name, Image: e.image, Command: []string{"sleep", "3600"}}.yaml())

	// The page is not reloaded: what it shows comes from its event stream.
	seen := b.WaitText(t, 2*time.Minute, name+" Running in the page's pod list", `[...document.querySelectorAll("#seen li")].map(l => l.textContent).join("\n")`,
		func(s string) bool { return strings.Contains(s, ns+"/"+name+" Running") })
	t.Logf("statuses the page saw, in order:\n%s", seen)
	lanes := b.WaitText(t, time.Minute, "the journey's swimlane up to Ready",
		`[...document.querySelectorAll("#swimlane circle")].map(c => c.dataset.what).join(",")`,
		func(s string) bool { return strings.HasPrefix(s, "Accepted,Stored,") && strings.Contains(s, ",Ready") })
	for _, step := range []string{"Popped", "Bound", "Seen", "SandboxReady", "Started", "Running"} {
		if !strings.Contains(lanes, step) {
			t.Errorf("swimlane steps %q lack %s", lanes, step)
		}
	}
	framework.MustContain(t, "journey panel", b.Eval(t, `document.getElementById("journey").innerText`),
		"pod "+ns+"/"+name+" on "+e.node+": Running, Ready", "api-server", "scheduler", "kubelet on "+e.node)
	if glance := b.Eval(t, `document.getElementById("glance").textContent`); !regexp.MustCompile(`^[0-9]+ nodes, [0-9]+ pods$`).MatchString(glance) {
		t.Errorf("cluster at a glance: %q", glance)
	}

	shot := filepath.Join(framework.ArtifactsDir(t), "dashboard-"+e.node+".png")
	b.Screenshot(t, shot)
	if info, err := os.Stat(shot); err != nil || info.Size() < 10_000 {
		t.Errorf("screenshot %s: %v (size %v), want a picture of the page", shot, err, info)
	}
	t.Logf("screenshot: %s", shot)
}

// testRunAttach is the newcomer's `kubectl run -i --rm`: a container that
// prints and ends at once still gets its output to the user, with and
// without --restart=Never.
func (e *podsEnv) testRunAttach(t *testing.T) {
	const ns = "run-attach"
	k := newKubectl(t, e.s.Server, "1.33")
	e.namespace(t, k, ns)
	// --restart=Always races kubectl's attach against the restarted
	// container, so it runs a few times.
	for _, tc := range []struct {
		name, restart string
		times         int
	}{{"once", "Never", 1}, {"always", "Always", 3}} {
		for i := range tc.times {
			name := fmt.Sprintf("hello-%s-%d", tc.name, i)
			stdout, stderr, err := k.run("run", "-n", ns, "-i", "--rm", name, "--restart="+tc.restart, "--image="+e.image, "--", "echo", "hello")
			if err != nil {
				t.Errorf("kubectl run -i --rm --restart=%s: %v\n%s%s", tc.restart, err, stdout, stderr)
				continue
			}
			if !strings.Contains(stdout, "hello\n") {
				t.Errorf("kubectl run -i --rm --restart=%s -- echo hello: stdout %q, stderr %q; want hello", tc.restart, stdout, stderr)
			}
		}
	}
}

// busyboxArchive writes the busybox test image as an image tarball named
// image (`skiff images import`, or a node's images directory) and returns
// its path.
func busyboxArchive(t *testing.T, image string) string {
	t.Helper()
	img, err := testimages.Busybox()
	if err != nil {
		t.Fatal(err)
	}
	archive := filepath.Join(t.TempDir(), "busybox.tar")
	f, err := os.Create(archive)
	if err != nil {
		t.Fatal(err)
	}
	if err := img.WriteArchive(f, image); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	return archive
}
