package apiserver

import (
	"context"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apiserver/pkg/admission"
	"k8s.io/apiserver/pkg/warning"
)

// mutatingPlugin changes an object's managed fields as told.
type mutatingPlugin struct {
	mutate func(*corev1.ConfigMap)
}

func (p mutatingPlugin) Handles(admission.Operation) bool { return true }
func (p mutatingPlugin) Admit(_ context.Context, a admission.Attributes, _ admission.ObjectInterfaces) error {
	p.mutate(a.GetObject().(*corev1.ConfigMap))
	return nil
}

type recordedWarnings []string

func (r *recordedWarnings) AddWarning(_, text string) { *r = append(*r, text) }

// TestManagedFieldsCheck: managed fields a mutating plugin made invalid are
// reset to what they were, with kube-apiserver's warning; valid changes
// and untouched fields stay.
func TestManagedFieldsCheck(t *testing.T) {
	valid := []metav1.ManagedFieldsEntry{{Manager: "m", Operation: metav1.ManagedFieldsOperationUpdate, APIVersion: "v1", FieldsType: "FieldsV1", FieldsV1: &metav1.FieldsV1{Raw: []byte(`{"f:data":{}}`)}}}
	tests := []struct {
		name        string
		mutate      func(*corev1.ConfigMap)
		wantManager string
		wantWarning bool
	}{
		{"untouched", func(*corev1.ConfigMap) {}, "m", false},
		{"valid change", func(cm *corev1.ConfigMap) {
			cm.ManagedFields = append([]metav1.ManagedFieldsEntry(nil), valid...)
			cm.ManagedFields[0].Manager = "other"
		}, "other", false},
		{"made invalid", func(cm *corev1.ConfigMap) {
			cm.ManagedFields = []metav1.ManagedFieldsEntry{{Manager: "bad", Operation: "Nonsense", FieldsType: "FieldsV1", FieldsV1: &metav1.FieldsV1{Raw: []byte(`{`)}}}
		}, "m", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "x", ManagedFields: valid}}
			var warnings recordedWarnings
			ctx := warning.WithWarningRecorder(context.Background(), &warnings)
			chain := withManagedFieldsCheck(mutatingPlugin{tt.mutate}).(admission.MutationInterface)
			attrs := admission.NewAttributesRecord(cm, nil, corev1.SchemeGroupVersion.WithKind("ConfigMap"), "default", "x", corev1.SchemeGroupVersion.WithResource("configmaps"), "", admission.Create, nil, false, nil)
			if err := chain.Admit(ctx, attrs, nil); err != nil {
				t.Fatal(err)
			}
			if len(cm.ManagedFields) != 1 || cm.ManagedFields[0].Manager != tt.wantManager {
				t.Errorf("managed fields %+v, want one by %s", cm.ManagedFields, tt.wantManager)
			}
			if got := len(warnings) > 0 && strings.Contains(warnings[0], "managedFields"); got != tt.wantWarning {
				t.Errorf("warnings %q, want one: %v", warnings, tt.wantWarning)
			}
		})
	}
}
