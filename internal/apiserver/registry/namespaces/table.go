package namespaces

import (
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/duration"
)

// now is the clock the AGE cell is measured against; tests replace it.
var now = time.Now

// TableColumns are the columns of `kubectl get namespaces`, as
// kube-apiserver serves them: NAME STATUS AGE.
var TableColumns = []metav1.TableColumnDefinition{
	{Name: "Name", Type: "string", Format: "name", Description: metav1.ObjectMeta{}.SwaggerDoc()["name"]},
	{Name: "Status", Type: "string", Description: "The status of the namespace"},
	{Name: "Age", Type: "string", Description: metav1.ObjectMeta{}.SwaggerDoc()["creationTimestamp"]},
}

// TableRow returns the cells of one namespace (name, phase, age), all
// strings. obj must be a *corev1.Namespace; anything else is an error.
func TableRow(obj runtime.Object) ([]interface{}, error) {
	ns, ok := obj.(*corev1.Namespace)
	if !ok {
		return nil, fmt.Errorf("namespaces table: want *v1.Namespace, got %T", obj)
	}
	return []interface{}{ns.Name, string(ns.Status.Phase), age(ns.CreationTimestamp)}, nil
}

// age is the time since t in kubectl's short form ("5m", "3d4h"), or
// "<unknown>" for the zero time.
func age(t metav1.Time) string {
	if t.IsZero() {
		return "<unknown>"
	}
	return duration.HumanDuration(now().Sub(t.Time))
}
