package leases

import (
	"fmt"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/duration"
)

// now is the clock the AGE cell is measured against; tests replace it.
var now = time.Now

// TableColumns are the columns of `kubectl get leases`, as kube-apiserver
// serves them: NAME HOLDER AGE.
var TableColumns = []metav1.TableColumnDefinition{
	{Name: "Name", Type: "string", Format: "name", Description: metav1.ObjectMeta{}.SwaggerDoc()["name"]},
	{Name: "Holder", Type: "string", Description: coordinationv1.LeaseSpec{}.SwaggerDoc()["holderIdentity"]},
	{Name: "Age", Type: "string", Description: metav1.ObjectMeta{}.SwaggerDoc()["creationTimestamp"]},
}

// TableRow returns the cells of one lease: its name, holder identity (empty
// when unheld) and age, all strings. obj must be a *coordinationv1.Lease;
// anything else is an error.
func TableRow(obj runtime.Object) ([]interface{}, error) {
	l, ok := obj.(*coordinationv1.Lease)
	if !ok {
		return nil, fmt.Errorf("leases table: want *coordination/v1.Lease, got %T", obj)
	}
	holder := ""
	if l.Spec.HolderIdentity != nil {
		holder = *l.Spec.HolderIdentity
	}
	return []interface{}{l.Name, holder, age(l.CreationTimestamp)}, nil
}

// age is the time since t in kubectl's short form ("5m", "3d4h"), or
// "<unknown>" for the zero time.
func age(t metav1.Time) string {
	if t.IsZero() {
		return "<unknown>"
	}
	return duration.HumanDuration(now().Sub(t.Time))
}
