package integration

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	auditv1 "k8s.io/apiserver/pkg/apis/audit/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/skiff-sh/skiff/internal/app"
	"github.com/skiff-sh/skiff/test/integration/framework"
)

// auditPolicy records secrets at Metadata, nothing of the server's own
// components, and every other request at Metadata.
const auditPolicy = `apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: ["RequestReceived"]
rules:
- level: None
  users: ["system:apiserver", "system:kube-scheduler", "system:kube-controller-manager"]
- level: None
  userGroups: ["system:serviceaccounts:kube-system", "system:nodes"]
- level: Metadata
`

// auditedCluster runs a cluster that audits with auditPolicy into
// audit.log of a directory of its own (cfg gives the rotation), and
// returns the log's path.
func auditedCluster(t *testing.T, cfg app.AuditConfig) (*framework.Cluster, string) {
	t.Helper()
	dir := t.TempDir()
	cfg.PolicyFile, cfg.LogPath = filepath.Join(dir, "policy.yaml"), filepath.Join(dir, "audit.log")
	if err := os.WriteFile(cfg.PolicyFile, []byte(auditPolicy), 0o600); err != nil {
		t.Fatal(err)
	}
	c := framework.NewCluster(t, framework.Options{DisableScheduler: true, Controllers: []string{"serviceaccount-controller"}, Audit: cfg})
	return c, cfg.LogPath
}

// TestAuditLog runs the server with an audit policy and log, as
// kube-apiserver's --audit-policy-file and --audit-log-path: requests are
// recorded as audit.k8s.io/v1 events, one JSON line each, with the user,
// the verb, the object, the response's code and the authorization
// decision; the policy's None rules keep the server's own requests out.
func TestAuditLog(t *testing.T) {
	c, logPath := auditedCluster(t, app.AuditConfig{})
	ctx := context.Background()
	bob, err := kubernetes.NewForConfig(c.InProcessConfig("bob", "developers"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := bob.CoreV1().Secrets("kube-system").List(ctx, metav1.ListOptions{}); !apierrors.IsForbidden(err) {
		t.Fatalf("bob lists kube-system secrets: %v, want 403", err)
	}
	if _, err := c.Client.CoreV1().Namespaces().Get(ctx, "default", metav1.GetOptions{}); err != nil {
		t.Fatal(err)
	}

	find := func(match func(auditv1.Event) bool) (auditv1.Event, bool) {
		f, err := os.Open(logPath)
		if err != nil {
			return auditv1.Event{}, false
		}
		defer f.Close()
		sc := bufio.NewScanner(f)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			var ev auditv1.Event
			if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
				t.Fatalf("audit log line is no audit.k8s.io/v1 Event: %v\n%s", err, sc.Text())
			}
			if ev.APIVersion != "audit.k8s.io/v1" || ev.Kind != "Event" {
				t.Fatalf("audit log line is a %s %s", ev.APIVersion, ev.Kind)
			}
			if ev.User.Username == "system:apiserver" || ev.User.Username == "system:kube-controller-manager" {
				t.Fatalf("the policy's None rule let an event of %s through: %s", ev.User.Username, sc.Text())
			}
			if match(ev) {
				return ev, true
			}
		}
		return auditv1.Event{}, false
	}
	var denied auditv1.Event
	err = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		var ok bool
		denied, ok = find(func(ev auditv1.Event) bool {
			return ev.User.Username == "bob" && ev.Stage == auditv1.StageResponseComplete
		})
		return ok, nil
	})
	if err != nil {
		t.Fatalf("no ResponseComplete event of bob's request in the audit log")
	}
	if denied.Verb != "list" || denied.ObjectRef == nil || denied.ObjectRef.Resource != "secrets" || denied.ObjectRef.Namespace != "kube-system" ||
		denied.ResponseStatus == nil || denied.ResponseStatus.Code != 403 || denied.Level != auditv1.LevelMetadata ||
		denied.Annotations["authorization.k8s.io/decision"] != "forbid" || denied.AuditID == "" {
		t.Errorf("bob's denied list: %+v", denied)
	}
	if _, ok := find(func(ev auditv1.Event) bool {
		return ev.User.Username == "bob" && ev.Stage == auditv1.StageRequestReceived
	}); ok {
		t.Errorf("the policy omits RequestReceived, the log has it")
	}
	admin, ok := find(func(ev auditv1.Event) bool {
		return ev.Verb == "get" && ev.ObjectRef != nil && ev.ObjectRef.Resource == "namespaces" && ev.ObjectRef.Name == "default"
	})
	if !ok {
		t.Fatalf("no event of the admin's get of namespace default")
	}
	if admin.ResponseStatus == nil || admin.ResponseStatus.Code != 200 || admin.Annotations["authorization.k8s.io/decision"] != "allow" || len(admin.SourceIPs) == 0 {
		t.Errorf("the admin's get: %+v", admin)
	}
}

// TestAuditLogRotation: with --audit-log-maxsize 1 and
// --audit-log-maxbackup 2, the log is rotated past a megabyte, as by
// kube-apiserver's lumberjack backend, keeping at most two old files
// beside the current one, each a file of whole JSON events.
func TestAuditLogRotation(t *testing.T) {
	c, logPath := auditedCluster(t, app.AuditConfig{MaxSize: 1, MaxBackups: 2})
	dir := filepath.Dir(logPath)
	ctx := context.Background()
	seen := map[string]bool{}
	rotated := func() []string {
		files, _ := filepath.Glob(filepath.Join(dir, "audit-*.log"))
		for _, f := range files {
			seen[f] = true
		}
		return files
	}
	// About 2,000 events a megabyte: until a third old file has been
	// made, so that maxbackup had one to drop.
	for i := 0; i < 30000 && len(seen) < 3; i++ {
		if _, err := c.Client.CoreV1().Namespaces().Get(ctx, "default", metav1.GetOptions{}); err != nil {
			t.Fatal(err)
		}
		if i%200 == 199 {
			rotated()
		}
	}
	if len(seen) < 3 {
		t.Fatalf("the log was rotated into %d files, want 3", len(seen))
	}
	var files []string
	if err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		files = rotated()
		return len(files) == 2, nil
	}); err != nil {
		t.Fatalf("old files %v, want two (maxbackup 2) of the %d made", files, len(seen))
	}
	for _, f := range append(files, logPath) {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if len(data) > 1<<20 {
			t.Errorf("%s: %d bytes, over the 1 MB maxsize", f, len(data))
		}
		if f == logPath {
			// The live file may end in an event being written.
			data = data[:bytes.LastIndexByte(data, '\n')+1]
		}
		sc := bufio.NewScanner(bytes.NewReader(data))
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			var ev auditv1.Event
			if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
				t.Fatalf("%s: a line that is not an event: %v: %q", f, err, sc.Text())
			}
		}
		if err := sc.Err(); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
	}
}
