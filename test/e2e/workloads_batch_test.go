package e2e

import (
	"fmt"
	"slices"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/skiff-sh/skiff/test/e2e/framework"
)

// testJob runs a Job that succeeds to condition Complete and one whose pod
// exits 1, with backoffLimit 1, to condition Failed: two pods failed,
// reason BackoffLimitExceeded and the Job controller's message.
func (e *workloadsEnv) testJob(t *testing.T) {
	const ns = "jobs"
	k := newKubectl(t, e.s.Server, workloadsKubectl)
	e.namespace(t, k, ns)
	ctx := framework.Context(t, 10*time.Minute)
	timeout := "--timeout=" + kubectlWaitTimeout.String()

	k.expect("job.batch/ok created", "create", "job", "ok", "-n", ns, "--image", e.images[0], "--", "sh", "-c", "echo done")
	applyManifests(t, k, ns, fmt.Sprintf(`apiVersion: batch/v1
kind: Job
metadata:
  name: fail
spec:
  backoffLimit: 1
  template:
    spec:
      restartPolicy: Never
      containers:
      - name: main
        image: %s
        command: ["sh", "-c", "exit 1"]
`, e.images[0]))

	k.expect("job.batch/ok condition met", "wait", "-n", ns, "--for=condition=complete", "job/ok", timeout)
	ok, err := e.cs.BatchV1().Jobs(ns).Get(ctx, "ok", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if ok.Status.Succeeded != 1 || ok.Status.Failed != 0 || ok.Status.CompletionTime == nil {
		t.Errorf("job ok: succeeded %d failed %d completionTime %v, want 1, 0, set", ok.Status.Succeeded, ok.Status.Failed, ok.Status.CompletionTime)
	}
	if c := jobCondition(ok, batchv1.JobComplete); c == nil || c.Status != corev1.ConditionTrue {
		t.Errorf("job ok: Complete condition %+v, want True", c)
	}
	if out := k.ok("logs", "-n", ns, "job/ok"); out != "done\n" {
		t.Errorf("logs job/ok: %q, want %q", out, "done\n")
	}

	k.expect("job.batch/fail condition met", "wait", "-n", ns, "--for=condition=failed", "job/fail", timeout)
	fail, err := e.cs.BatchV1().Jobs(ns).Get(ctx, "fail", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// pkg/controller/job/job_controller.go (k8s.io/kubernetes v1.37.2).
	const wantMessage = "Job has reached the specified backoff limit"
	c := jobCondition(fail, batchv1.JobFailed)
	if c == nil || c.Status != corev1.ConditionTrue || c.Reason != batchv1.JobReasonBackoffLimitExceeded || c.Message != wantMessage {
		t.Errorf("job fail: Failed condition %+v, want True %s %q", c, batchv1.JobReasonBackoffLimitExceeded, wantMessage)
	}
	if fail.Status.Failed != 2 || fail.Status.Succeeded != 0 || fail.Status.Active != 0 {
		t.Errorf("job fail: failed %d succeeded %d active %d, want 2 (backoffLimit 1), 0, 0", fail.Status.Failed, fail.Status.Succeeded, fail.Status.Active)
	}
	pods, err := e.cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "job-name=fail"})
	if err != nil {
		t.Fatal(err)
	}
	if len(pods.Items) != 2 {
		t.Errorf("job fail: %d pods, want 2: %s", len(pods.Items), podSummary(pods.Items))
	}
	for i := range pods.Items {
		p := &pods.Items[i]
		if p.Status.Phase != corev1.PodFailed || podContainer(p).State.Terminated == nil || podContainer(p).State.Terminated.ExitCode != 1 {
			t.Errorf("job fail: pod %s %s, want Failed with exit code 1", p.Name, describePodState(p))
		}
	}

	rows := framework.ParseTable(k.ok("get", "jobs", "-n", ns))
	if len(rows) != 3 || len(rows[0]) != 5 {
		t.Fatalf("get jobs: %q, want a header of 5 columns and two rows", rows)
	}
	if want := []string{"NAME", "STATUS", "COMPLETIONS", "DURATION", "AGE"}; !slices.Equal(rows[0], want) {
		t.Errorf("get jobs: header %q, want %q", rows[0], want)
	}
	checkRow(t, "get jobs", []string{rows[1][0], rows[1][1], rows[1][2], rows[1][4]}, []string{"fail", "Failed", "0/1", "AGE"})
	checkRow(t, "get jobs", []string{rows[2][0], rows[2][1], rows[2][2], rows[2][4]}, []string{"ok", "Complete", "1/1", "AGE"})
}

func jobCondition(j *batchv1.Job, typ batchv1.JobConditionType) *batchv1.JobCondition {
	for i := range j.Status.Conditions {
		if j.Status.Conditions[i].Type == typ {
			return &j.Status.Conditions[i]
		}
	}
	return nil
}

// testCronJob creates a CronJob that fires every minute and waits for its
// first Job: owned by the CronJob, named after the scheduled minute, run to
// completion and recorded in the CronJob's status.
func (e *workloadsEnv) testCronJob(t *testing.T) {
	const ns = "cron"
	k := newKubectl(t, e.s.Server, workloadsKubectl)
	e.namespace(t, k, ns)
	ctx := framework.Context(t, 10*time.Minute)

	k.expect("cronjob.batch/tick created", "create", "cronjob", "tick", "-n", ns, "--image", e.images[0], "--schedule", "*/1 * * * *",
		"--", "sh", "-c", "echo tick")
	cj, err := e.cs.BatchV1().CronJobs(ns).Get(ctx, "tick", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var job batchv1.Job
	framework.WaitFor(t, cronTimeout, "a Job of CronJob tick", func() (bool, error) {
		jobs, err := e.cs.BatchV1().Jobs(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		if len(jobs.Items) == 0 {
			return false, fmt.Errorf("no Job yet")
		}
		job = jobs.Items[0]
		return true, nil
	})
	owner := metav1.GetControllerOf(&job)
	if owner == nil || owner.Kind != "CronJob" || owner.APIVersion != "batch/v1" || owner.Name != "tick" || owner.UID != cj.UID {
		t.Errorf("job %s: controller %+v, want CronJob tick (uid %s)", job.Name, owner, cj.UID)
	}
	k.expect("job.batch/"+job.Name+" condition met", "wait", "-n", ns, "--for=condition=complete", "job/"+job.Name, "--timeout="+kubectlWaitTimeout.String())
	framework.WaitFor(t, workloadTimeout, "CronJob tick's status", func() (bool, error) {
		cj, err = e.cs.BatchV1().CronJobs(ns).Get(ctx, "tick", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		if cj.Status.LastScheduleTime == nil || cj.Status.LastSuccessfulTime == nil {
			return false, fmt.Errorf("lastScheduleTime %v, lastSuccessfulTime %v", cj.Status.LastScheduleTime, cj.Status.LastSuccessfulTime)
		}
		return true, nil
	})
	// The CronJob controller names a Job after its scheduled time, in
	// minutes since the epoch, and notes that time in an annotation.
	scheduled, err := time.Parse(time.RFC3339, job.Annotations[batchv1.CronJobScheduledTimestampAnnotation])
	if err != nil {
		t.Errorf("job %s: annotation %s: %v", job.Name, batchv1.CronJobScheduledTimestampAnnotation, err)
	} else {
		if want := fmt.Sprintf("tick-%d", scheduled.Unix()/60); job.Name != want || scheduled.Second() != 0 {
			t.Errorf("job %s scheduled at %v, want a whole minute and the name %s", job.Name, scheduled, want)
		}
		if last := cj.Status.LastScheduleTime.Time; last.Before(scheduled) {
			t.Errorf("CronJob tick: lastScheduleTime %v before its Job's scheduled time %v", last, scheduled)
		}
	}
	if out := k.ok("logs", "-n", ns, "job/"+job.Name); out != "tick\n" {
		t.Errorf("logs job/%s: %q, want %q", job.Name, out, "tick\n")
	}
}
