package integration

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/skiff-sh/skiff/test/integration/framework"
)

// TestAdmissionPolicies: ValidatingAdmissionPolicies and
// MutatingAdmissionPolicies are enforced from their creation, as in
// kube-apiserver, and stop being enforced once deleted (the admission chain
// passes requests by the policy plugins only while no policy exists).
func TestAdmissionPolicies(t *testing.T) {
	c := framework.NewCluster(t, framework.Options{DisableScheduler: true, Controllers: []string{"namespace-controller"}})
	ctx := context.Background()
	configMaps := c.Client.CoreV1().ConfigMaps("default")
	n := 0
	create := func(data map[string]string) (*corev1.ConfigMap, error) {
		n++
		return configMaps.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("cm-%d", n)}, Data: data}, metav1.CreateOptions{})
	}
	forbidden := map[string]string{"forbidden": "x"}
	if _, err := create(forbidden); err != nil {
		t.Fatalf("no policy yet: %v", err)
	}

	configMapRules := &admissionregistrationv1.MatchResources{ResourceRules: []admissionregistrationv1.NamedRuleWithOperations{{
		RuleWithOperations: admissionregistrationv1.RuleWithOperations{
			Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create},
			Rule:       admissionregistrationv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"configmaps"}},
		},
	}}}
	validating := c.Client.AdmissionregistrationV1().ValidatingAdmissionPolicies()
	if _, err := validating.Create(ctx, &admissionregistrationv1.ValidatingAdmissionPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: "no-forbidden-key"},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicySpec{
			MatchConstraints: configMapRules,
			Validations:      []admissionregistrationv1.Validation{{Expression: "!has(object.data) || !('forbidden' in object.data)", Message: "the key forbidden is not allowed"}},
		},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	validatingBindings := c.Client.AdmissionregistrationV1().ValidatingAdmissionPolicyBindings()
	if _, err := validatingBindings.Create(ctx, &admissionregistrationv1.ValidatingAdmissionPolicyBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "no-forbidden-key"},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicyBindingSpec{
			PolicyName:        "no-forbidden-key",
			ValidationActions: []admissionregistrationv1.ValidationAction{admissionregistrationv1.Deny},
		},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// Policies take effect once the API server's informers have them.
	var denial error
	err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		_, denial = create(forbidden)
		return denial != nil, nil
	})
	if err != nil {
		t.Fatal("a ConfigMap with the forbidden key was still admitted 30 s after the policy")
	}
	const wantDenial = "ValidatingAdmissionPolicy 'no-forbidden-key' with binding 'no-forbidden-key' denied request: the key forbidden is not allowed"
	if !apierrors.IsInvalid(denial) || !strings.Contains(denial.Error(), wantDenial) {
		t.Fatalf("denied with %v (reason %s), want Invalid with %q", denial, apierrors.ReasonForError(denial), wantDenial)
	}
	if _, err := create(map[string]string{"allowed": "x"}); err != nil {
		t.Fatalf("a ConfigMap the policy allows: %v", err)
	}

	mutating := c.Client.AdmissionregistrationV1().MutatingAdmissionPolicies()
	if _, err := mutating.Create(ctx, &admissionregistrationv1.MutatingAdmissionPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: "label-configmaps"},
		Spec: admissionregistrationv1.MutatingAdmissionPolicySpec{
			MatchConstraints:   configMapRules,
			ReinvocationPolicy: admissionregistrationv1.NeverReinvocationPolicy,
			Mutations: []admissionregistrationv1.Mutation{{
				PatchType: admissionregistrationv1.PatchTypeApplyConfiguration,
				ApplyConfiguration: &admissionregistrationv1.ApplyConfiguration{
					Expression: `Object{metadata: Object.metadata{labels: {"mutated": "yes"}}}`,
				},
			}},
		},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Client.AdmissionregistrationV1().MutatingAdmissionPolicyBindings().Create(ctx, &admissionregistrationv1.MutatingAdmissionPolicyBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "label-configmaps"},
		Spec:       admissionregistrationv1.MutatingAdmissionPolicyBindingSpec{PolicyName: "label-configmaps"},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	var labelled *corev1.ConfigMap
	err = wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		cm, err := create(nil)
		if err != nil {
			return false, err
		}
		labelled = cm
		return cm.Labels["mutated"] == "yes", nil
	})
	if err != nil {
		t.Fatalf("ConfigMaps still created without the policy's label 30 s after it (last: labels %v): %v", labelled.Labels, err)
	}

	// Deleted, the validating policy no longer denies.
	if err := validatingBindings.Delete(ctx, "no-forbidden-key", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := validating.Delete(ctx, "no-forbidden-key", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	err = wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		_, err := create(forbidden)
		return err == nil, nil
	})
	if err != nil {
		t.Fatal("a ConfigMap with the forbidden key was still denied 30 s after the policy was deleted")
	}
}
