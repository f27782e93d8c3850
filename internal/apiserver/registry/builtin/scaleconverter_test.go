package builtin

import (
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/structured-merge-diff/v6/fieldpath"
	"sigs.k8s.io/structured-merge-diff/v6/typed"
)

// TestTypeConverterKnowsScale: the built-in type converter describes
// autoscaling/v1 Scale (scale subresources' managed fields) and the
// authentication and authorization reviews besides the kinds of
// client-go's apply configurations.
func TestTypeConverterKnowsScale(t *testing.T) {
	scale := &autoscalingv1.Scale{
		TypeMeta:   metav1.TypeMeta{APIVersion: "autoscaling/v1", Kind: "Scale"},
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default"},
		Spec:       autoscalingv1.ScaleSpec{Replicas: 3},
	}
	v, err := TypeConverter.ObjectToTyped(scale, typed.AllowDuplicates)
	if err != nil {
		t.Fatalf("Scale: %v", err)
	}
	set, err := v.ToFieldSet()
	if err != nil {
		t.Fatal(err)
	}
	if !set.Has(fieldPath("spec", "replicas")) {
		t.Errorf("Scale's fields %v lack spec.replicas", set)
	}
	back, err := TypeConverter.TypedToObject(v)
	if err != nil {
		t.Fatalf("back to an object: %v", err)
	}
	if back.GetObjectKind().GroupVersionKind() != scaleKind {
		t.Errorf("back as %v", back.GetObjectKind().GroupVersionKind())
	}
	// The reviews, which have no apply configurations either.
	for _, review := range []runtime.Object{
		&authorizationv1.SubjectAccessReview{TypeMeta: metav1.TypeMeta{APIVersion: "authorization.k8s.io/v1", Kind: "SubjectAccessReview"},
			Spec: authorizationv1.SubjectAccessReviewSpec{User: "u", ResourceAttributes: &authorizationv1.ResourceAttributes{Verb: "get"}}},
		&authenticationv1.SelfSubjectReview{TypeMeta: metav1.TypeMeta{APIVersion: "authentication.k8s.io/v1", Kind: "SelfSubjectReview"}},
		&authenticationv1.TokenReview{TypeMeta: metav1.TypeMeta{APIVersion: "authentication.k8s.io/v1", Kind: "TokenReview"}},
	} {
		if _, err := TypeConverter.ObjectToTyped(review, typed.AllowDuplicates); err != nil {
			t.Errorf("%v: %v", review.GetObjectKind().GroupVersionKind(), err)
		}
	}
	d := &appsv1.Deployment{TypeMeta: metav1.TypeMeta{APIVersion: "apps/v1", Kind: "Deployment"}}
	if _, err := TypeConverter.ObjectToTyped(d, typed.AllowDuplicates); err != nil {
		t.Errorf("Deployment: %v", err)
	}
}

func fieldPath(names ...string) fieldpath.Path {
	p := make(fieldpath.Path, 0, len(names))
	for _, n := range names {
		p = append(p, fieldpath.PathElement{FieldName: &n})
	}
	return p
}
