package integration

import (
	"context"
	"strings"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/skiff-sh/skiff/test/integration/framework"
)

// TestValidatingAdmissionPolicyStatus checks kube-controller-manager's
// validatingadmissionpolicy-status controller as skiff builds it (its type
// checker's schemas resolved at the first policy, not at start): a
// policy's expressions are checked against the schema of the kinds it
// matches, and an expression naming a field Deployments lack gets upstream's
// warning in status.typeChecking, while a correct policy gets none.
func TestValidatingAdmissionPolicyStatus(t *testing.T) {
	c := framework.NewCluster(t, framework.Options{DisableScheduler: true, Controllers: []string{"validatingadmissionpolicy-status-controller"}})
	ctx := context.Background()
	policy := func(name, expression string) *admissionregistrationv1.ValidatingAdmissionPolicy {
		return &admissionregistrationv1.ValidatingAdmissionPolicy{
			ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: admissionregistrationv1.ValidatingAdmissionPolicySpec{
				MatchConstraints: &admissionregistrationv1.MatchResources{ResourceRules: []admissionregistrationv1.NamedRuleWithOperations{{
					RuleWithOperations: admissionregistrationv1.RuleWithOperations{
						Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create},
						Rule:       admissionregistrationv1.Rule{APIGroups: []string{"apps"}, APIVersions: []string{"v1"}, Resources: []string{"deployments"}},
					},
				}}},
				Validations: []admissionregistrationv1.Validation{{Expression: expression}},
			},
		}
	}
	policies := c.Client.AdmissionregistrationV1().ValidatingAdmissionPolicies()
	for _, p := range []*admissionregistrationv1.ValidatingAdmissionPolicy{
		policy("wrong-field", "object.spec.replicaz > 1"),
		policy("right-field", "object.spec.replicas <= 10"),
	} {
		if _, err := policies.Create(ctx, p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	checked := func(name string) *admissionregistrationv1.ValidatingAdmissionPolicy {
		t.Helper()
		var got *admissionregistrationv1.ValidatingAdmissionPolicy
		err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
			p, err := policies.Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return false, err
			}
			got = p
			return p.Status.ObservedGeneration == p.Generation && p.Status.TypeChecking != nil, nil
		})
		if err != nil {
			t.Fatalf("policy %s never type-checked: status %+v: %v", name, got.Status, err)
		}
		return got
	}
	wrong := checked("wrong-field")
	if w := wrong.Status.TypeChecking.ExpressionWarnings; len(w) != 1 || w[0].FieldRef != "spec.validations[0].expression" ||
		!strings.Contains(w[0].Warning, "apps/v1, Kind=Deployment") || !strings.Contains(w[0].Warning, "undefined field 'replicaz'") {
		t.Errorf("wrong-field's type-checking warnings = %+v, want one on spec.validations[0].expression for Deployment's undefined field 'replicaz'", w)
	}
	if w := checked("right-field").Status.TypeChecking.ExpressionWarnings; len(w) != 0 {
		t.Errorf("right-field's type-checking warnings = %+v, want none", w)
	}
}
