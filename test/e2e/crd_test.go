package e2e

import (
	"context"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/kubernetes"

	"github.com/skiff-sh/skiff/test/e2e/framework"
)

// widgetCRD is a CustomResourceDefinition with what users reach for: a
// schema with defaults, an enum and a CEL rule, two versions converted by
// strategy None, status and scale subresources, printer columns, a short
// name and a category.
const widgetCRD = `apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: widgets.e2e.skiff.sh
spec:
  group: e2e.skiff.sh
  scope: Namespaced
  names:
    plural: widgets
    singular: widget
    kind: Widget
    listKind: WidgetList
    shortNames: [wd]
    categories: [skiff-e2e]
  versions:
  - &version
    name: v1
    served: true
    storage: true
    subresources:
      status: {}
      scale:
        specReplicasPath: .spec.replicas
        statusReplicasPath: .status.replicas
        labelSelectorPath: .status.selector
    additionalPrinterColumns:
    - {name: Size, type: string, jsonPath: .spec.size}
    - {name: Replicas, type: integer, jsonPath: .spec.replicas}
    - {name: Phase, type: string, jsonPath: .status.phase}
    - {name: Age, type: date, jsonPath: .metadata.creationTimestamp}
    schema:
      openAPIV3Schema:
        type: object
        description: A Widget is a thing skiff's end-to-end tests make.
        properties:
          spec:
            type: object
            description: spec is what the widget should be.
            x-kubernetes-validations:
            - rule: self.replicas <= self.maxReplicas
              message: replicas must not exceed maxReplicas
            properties:
              size:
                type: string
                description: size of the widget.
                default: medium
                enum: [small, medium, large]
              replicas: {type: integer, minimum: 0, default: 1}
              maxReplicas: {type: integer, default: 10}
          status:
            type: object
            properties:
              phase: {type: string}
              replicas: {type: integer}
              selector: {type: string}
  - <<: *version
    name: v1beta1
    storage: false
`

// TestCustomResourceDefinitions drives a CustomResourceDefinition with
// the real kubectl of each version, each against a server of its own
// (agent disabled: no pods).
func TestCustomResourceDefinitions(t *testing.T) {
	for _, version := range kubectlVersions {
		t.Run("kubectl-"+version, func(t *testing.T) {
			s := framework.StartServer(t, framework.Options{})
			testCustomResourceDefinitions(t, newKubectl(t, s, version), s.Clientset(t))
		})
	}
}

func testCustomResourceDefinitions(t *testing.T, k kubectl, cs kubernetes.Interface) {
	ctx := framework.Context(t, 5*time.Minute)
	dir := t.TempDir()
	crdFile := filepath.Join(dir, "crd.yaml")
	writeFile(t, crdFile, widgetCRD)

	// Created, then served within a second, Established with its names
	// accepted.
	k.expect("customresourcedefinition.apiextensions.k8s.io/widgets.e2e.skiff.sh created", "apply", "-f", crdFile)
	// The first definition pays for what upstream's packages initialize
	// once; the one created again at the end must be served within a
	// second.
	took := waitServed(ctx, t, cs, "e2e.skiff.sh/v1", "widgets")
	t.Logf("widgets served %v after kubectl apply returned", took)
	k.expect("customresourcedefinition.apiextensions.k8s.io/widgets.e2e.skiff.sh condition met",
		"wait", "--for=condition=Established", "--timeout=10s", "crd/widgets.e2e.skiff.sh")
	conds := k.ok("get", "crd", "widgets.e2e.skiff.sh", "-o", `jsonpath={range .status.conditions[*]}{.type}={.status}/{.reason}{"\n"}{end}`)
	for _, want := range []string{"NamesAccepted=True/NoConflicts", "Established=True/InitialNamesAccepted"} {
		if !strings.Contains(conds, want) {
			t.Errorf("crd conditions:\n%s\nwant %s", conds, want)
		}
	}

	// Defaults, pruning (with kubectl's warning), printer columns.
	w1 := filepath.Join(dir, "w1.yaml")
	writeFile(t, w1, "apiVersion: e2e.skiff.sh/v1\nkind: Widget\nmetadata:\n  name: w1\nspec:\n  bogus: pruned\n")
	// kubectl validates strictly by default: the server refuses the
	// unknown field; with --validate=warn it prunes it and warns.
	_, stderr := k.fail("apply", "-f", w1)
	framework.MustContain(t, "apply w1", stderr, `Widget in version "v1" cannot be handled as a Widget: strict decoding error: unknown field "spec.bogus"`)
	stdout, stderr, err := k.run("apply", "--validate=warn", "-f", w1)
	if err != nil || stdout != "widget.e2e.skiff.sh/w1 created\n" || !strings.Contains(stderr, `unknown field "spec.bogus"`) {
		t.Errorf("apply --validate=warn w1: %v\nstdout %q\nstderr %q\nwant created, with a warning about spec.bogus", err, stdout, stderr)
	}
	if got := k.ok("get", "widget", "w1", "-o", "jsonpath={.spec}"); got != `{"maxReplicas":10,"replicas":1,"size":"medium"}` {
		t.Errorf("w1 spec %s, want the defaults and no bogus field", got)
	}
	rows := framework.ParseTable(k.ok("get", "widgets"))
	if len(rows) != 2 || strings.Join(rows[0], " ") != "NAME SIZE REPLICAS PHASE AGE" {
		t.Fatalf("get widgets: %v, want the printer columns and one row", rows)
	}
	// No status.phase yet: an empty cell.
	checkRow(t, "get widgets", rows[1], []string{"w1", "medium", "1", "AGE"})
	for _, name := range []string{"wd", "skiff-e2e", "widgets.e2e.skiff.sh", "widgets.v1beta1.e2e.skiff.sh"} {
		if rows := framework.ParseTable(k.ok("get", name)); len(rows) != 2 || rows[1][0] != "w1" {
			t.Errorf("get %s: %v", name, rows)
		}
	}

	// Applied again, changed: a merge patch (custom resources take no
	// strategic merge patch).
	writeFile(t, w1, "apiVersion: e2e.skiff.sh/v1\nkind: Widget\nmetadata:\n  name: w1\nspec:\n  size: small\n")
	k.expect("widget.e2e.skiff.sh/w1 configured", "apply", "-f", w1)
	writeFile(t, w1, "apiVersion: e2e.skiff.sh/v1\nkind: Widget\nmetadata:\n  name: w1\nspec: {}\n")
	k.expect("widget.e2e.skiff.sh/w1 configured", "apply", "-f", w1)
	if got := k.ok("get", "widget", "w1", "-o", "jsonpath={.spec.size}"); got != "medium" {
		t.Errorf("size %q after apply removed it, want the default back", got)
	}

	// Validation: the schema and the CEL rule, in kubectl's words.
	bad := filepath.Join(dir, "bad.yaml")
	writeFile(t, bad, "apiVersion: e2e.skiff.sh/v1\nkind: Widget\nmetadata:\n  name: bad\nspec:\n  size: huge\n")
	_, stderr = k.fail("apply", "-f", bad)
	framework.MustContain(t, "apply bad.yaml", stderr,
		`The Widget "bad" is invalid:`, `spec.size: Unsupported value: "huge": supported values: "small", "medium", "large"`)
	writeFile(t, bad, "apiVersion: e2e.skiff.sh/v1\nkind: Widget\nmetadata:\n  name: bad\nspec:\n  replicas: 20\n")
	_, stderr = k.fail("apply", "-f", bad)
	framework.MustContain(t, "apply bad.yaml", stderr,
		`The Widget "bad" is invalid: spec: Invalid value: `, `replicas must not exceed maxReplicas`)

	// explain reads the schema from OpenAPI.
	stdout = k.ok("explain", "widgets.spec")
	for _, re := range []string{
		`(?m)^KIND:\s+Widget$`,
		`(?m)^VERSION:\s+v1$`,
		`(?m)^FIELD:\s+spec <Object>$`,
		`(?m)^\s+spec is what the widget should be\.$`,
		`(?m)^  size\s+<string>$`,
		`(?m)^  replicas\s+<integer>$`,
	} {
		if !regexp.MustCompile(re).MatchString(stdout) {
			t.Errorf("explain widgets.spec: no match for %s in:\n%s", re, stdout)
		}
	}

	// The status subresource: patched through it, ignored through the
	// main resource.
	k.expect("widget.e2e.skiff.sh/w1 patched", "patch", "widget", "w1", "--subresource=status", "--type=merge",
		"-p", `{"status":{"phase":"Ready","replicas":1,"selector":"app=w1"}}`)
	k.expect("widget.e2e.skiff.sh/w1 patched (no change)", "patch", "widget", "w1", "--type=merge", "-p", `{"status":{"phase":"Ignored"}}`)
	if got := k.ok("get", "widget", "w1", "-o", "jsonpath={.status.phase}"); got != "Ready" {
		t.Errorf("status.phase %q, want Ready", got)
	}

	// The scale subresource.
	k.expect("widget.e2e.skiff.sh/w1 scaled", "scale", "widget", "w1", "--replicas=3")
	k.expect("scale.autoscaling/w1 patched", "patch", "widget", "w1", "--subresource=scale", "--type=merge", "-p", `{"spec":{"replicas":4}}`)
	rows = framework.ParseTable(k.ok("get", "widget", "w1", "--subresource=scale"))
	if len(rows) != 2 || strings.Join(rows[0], " ") != "NAME DESIRED AVAILABLE AGE" {
		t.Fatalf("get --subresource=scale: %v", rows)
	}
	checkRow(t, "get --subresource=scale", rows[1], []string{"w1", "4", "1", "AGE"})
	if got := k.ok("get", "widget", "w1", "-o", "jsonpath={.spec.replicas}"); got != "4" {
		t.Errorf("spec.replicas %s after scaling, want 4", got)
	}
	_, stderr = k.fail("scale", "widget", "w1", "--replicas=11")
	framework.MustContain(t, "scale past maxReplicas", stderr, "replicas must not exceed maxReplicas")
	rows = framework.ParseTable(k.ok("get", "widgets"))
	checkRow(t, "get widgets after scaling", rows[1], []string{"w1", "medium", "4", "Ready", "AGE"})

	// Versions converted by strategy None; server-side apply.
	if got := k.ok("get", "widgets.v1beta1.e2e.skiff.sh", "w1", "-o", "jsonpath={.apiVersion}"); got != "e2e.skiff.sh/v1beta1" {
		t.Errorf("w1 through v1beta1 is %s", got)
	}
	w2 := filepath.Join(dir, "w2.yaml")
	writeFile(t, w2, "apiVersion: e2e.skiff.sh/v1beta1\nkind: Widget\nmetadata:\n  name: w2\nspec:\n  size: large\n")
	k.expect("widget.e2e.skiff.sh/w2 serverside-applied", "apply", "--server-side", "-f", w2)
	if got := k.ok("get", "widget", "w2", "-o", "jsonpath={.apiVersion} {.spec.size} {.metadata.managedFields[0].manager}"); got != "e2e.skiff.sh/v1 large kubectl" {
		t.Errorf("w2: %q, want it in v1, large, managed by kubectl", got)
	}

	// Deleting the definition deletes its objects and stops serving it.
	k.expect(`customresourcedefinition.apiextensions.k8s.io "widgets.e2e.skiff.sh" deleted`, "delete", "-f", crdFile)
	if got := k.ok("api-resources", "--api-group=e2e.skiff.sh", "-o", "name"); got != "" {
		t.Errorf("api-resources after the definition is gone: %q", got)
	}
	_, stderr = k.fail("get", "--raw", "/apis/e2e.skiff.sh/v1/namespaces/default/widgets")
	framework.MustContain(t, "get widgets after the definition is gone", stderr, `the server could not find the requested resource`)
	k.expect("customresourcedefinition.apiextensions.k8s.io/widgets.e2e.skiff.sh created", "apply", "-f", crdFile)
	took = waitServed(ctx, t, cs, "e2e.skiff.sh/v1", "widgets")
	t.Logf("widgets served %v after kubectl apply created the definition again", took)
	if took > time.Second {
		t.Errorf("widgets served %v after kubectl apply created the definition again, want within a second", took)
	}
	k.expect("customresourcedefinition.apiextensions.k8s.io/widgets.e2e.skiff.sh condition met",
		"wait", "--for=condition=Established", "--timeout=10s", "crd/widgets.e2e.skiff.sh")
	stdout, stderr, err = k.run("get", "widgets", "--all-namespaces")
	if err != nil || stdout != "" || strings.TrimSpace(stderr) != "No resources found" {
		t.Errorf("get widgets of the new definition: %v\nstdout %q\nstderr %q\nwant none", err, stdout, stderr)
	}
}

// waitServed polls discovery until groupVersion lists resource, and
// returns how long that took.
func waitServed(ctx context.Context, t *testing.T, cs kubernetes.Interface, groupVersion, resource string) time.Duration {
	t.Helper()
	start := time.Now()
	for {
		if list, err := cs.Discovery().ServerResourcesForGroupVersion(groupVersion); err == nil {
			for _, r := range list.APIResources {
				if r.Name == resource {
					return time.Since(start)
				}
			}
		}
		if ctx.Err() != nil {
			t.Fatalf("%s %s not served", groupVersion, resource)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
