package priority

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func class(name string, value int32, def bool, policy corev1.PreemptionPolicy) *schedulingv1.PriorityClass {
	return &schedulingv1.PriorityClass{ObjectMeta: metav1.ObjectMeta{Name: name}, Value: value, GlobalDefault: def, PreemptionPolicy: &policy}
}

func pod(className string) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "my-pod", Namespace: "default"}, Spec: corev1.PodSpec{PriorityClassName: className}}
}

func TestAdmitPodCreate(t *testing.T) {
	gold := class("gold", 1000, false, corev1.PreemptLowerPriority)
	polite := class("polite", 500, false, corev1.PreemptNever)
	base := class("base", 10, true, corev1.PreemptLowerPriority)
	i32 := func(v int32) *int32 { return &v }
	never := corev1.PreemptNever
	tests := []struct {
		name       string
		pod        *corev1.Pod
		classes    []*schedulingv1.PriorityClass
		wantClass  string
		wantValue  int32
		wantPolicy corev1.PreemptionPolicy
		wantErr    string
	}{
		{"no class, no default", pod(""), []*schedulingv1.PriorityClass{gold}, "", 0, corev1.PreemptLowerPriority, ""},
		{"no class, global default", pod(""), []*schedulingv1.PriorityClass{gold, base}, "base", 10, corev1.PreemptLowerPriority, ""},
		{"named class", pod("gold"), []*schedulingv1.PriorityClass{gold, base}, "gold", 1000, corev1.PreemptLowerPriority, ""},
		{"class that never preempts", pod("polite"), []*schedulingv1.PriorityClass{polite}, "polite", 500, corev1.PreemptNever, ""},
		{"system class", pod(SystemNodeCritical), SystemClasses(), SystemNodeCritical, 2000001000, corev1.PreemptLowerPriority, ""},
		{"unknown class", pod("platinum"), []*schedulingv1.PriorityClass{gold}, "", 0, "",
			`pods "my-pod" is forbidden: no PriorityClass with name platinum was found`},
		{"priority matching the class", func() *corev1.Pod { p := pod("gold"); p.Spec.Priority = i32(1000); return p }(),
			[]*schedulingv1.PriorityClass{gold}, "gold", 1000, corev1.PreemptLowerPriority, ""},
		{"priority not matching the class", func() *corev1.Pod { p := pod("gold"); p.Spec.Priority = i32(7); return p }(),
			[]*schedulingv1.PriorityClass{gold}, "", 0, "",
			`pods "my-pod" is forbidden: the integer value of priority (7) must not be provided in pod spec; priority admission controller computed 1000 from the given PriorityClass name`},
		{"preemption policy not matching the class", func() *corev1.Pod { p := pod("gold"); p.Spec.PreemptionPolicy = &never; return p }(),
			[]*schedulingv1.PriorityClass{gold}, "", 0, "",
			`pods "my-pod" is forbidden: the string value of PreemptionPolicy (Never) must not be provided in pod spec; priority admission controller computed PreemptLowerPriority from the given PriorityClass name`},
		{"generateName in the message", func() *corev1.Pod { p := pod("x"); p.Name, p.GenerateName = "", "web-"; return p }(),
			nil, "", 0, "", `pods "web-" is forbidden: no PriorityClass with name x was found`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := AdmitPodCreate(tc.pod, tc.classes)
			if tc.wantErr != "" {
				if err == nil || err.Error() != tc.wantErr || !apierrors.IsForbidden(err) {
					t.Fatalf("error %v, want Forbidden %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			s := tc.pod.Spec
			if s.PriorityClassName != tc.wantClass || s.Priority == nil || *s.Priority != tc.wantValue || s.PreemptionPolicy == nil || *s.PreemptionPolicy != tc.wantPolicy {
				t.Errorf("class %q priority %v policy %v, want %q %d %s", s.PriorityClassName, s.Priority, s.PreemptionPolicy, tc.wantClass, tc.wantValue, tc.wantPolicy)
			}
		})
	}
}

func TestAdmitPodUpdate(t *testing.T) {
	old := pod("gold")
	v := int32(1000)
	p := corev1.PreemptLowerPriority
	old.Spec.Priority, old.Spec.PreemptionPolicy = &v, &p
	upd := pod("gold")
	AdmitPodUpdate(upd, old)
	if upd.Spec.Priority == nil || *upd.Spec.Priority != 1000 || upd.Spec.PreemptionPolicy == nil {
		t.Errorf("update lost the priority: %+v", upd.Spec)
	}
}

func TestAdmitClass(t *testing.T) {
	base := class("base", 10, true, corev1.PreemptLowerPriority)
	other := class("other", 20, true, corev1.PreemptLowerPriority)
	if err := AdmitClass(other, nil, []*schedulingv1.PriorityClass{base}); err == nil ||
		err.Error() != `priorityclasses.scheduling.k8s.io "other" is forbidden: PriorityClass base is already marked as default. Only one default can exist` {
		t.Errorf("second default: %v", err)
	}
	if err := AdmitClass(base, base, []*schedulingv1.PriorityClass{base}); err != nil {
		t.Errorf("updating the default: %v", err)
	}
	if err := AdmitClass(class("plain", 5, false, corev1.PreemptNever), nil, []*schedulingv1.PriorityClass{base}); err != nil {
		t.Errorf("a non-default class: %v", err)
	}
}
