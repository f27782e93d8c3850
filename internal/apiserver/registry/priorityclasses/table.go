package priorityclasses

import (
	"fmt"
	"time"

	schedulingv1 "k8s.io/api/scheduling/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/duration"
)

// now is the clock the AGE cell is measured against; tests replace it.
var now = time.Now

// TableColumns are the columns of `kubectl get priorityclasses`, as
// kube-apiserver serves them: NAME VALUE GLOBAL-DEFAULT AGE PREEMPTIONPOLICY.
var TableColumns = []metav1.TableColumnDefinition{
	{Name: "Name", Type: "string", Format: "name", Description: metav1.ObjectMeta{}.SwaggerDoc()["name"]},
	{Name: "Value", Type: "integer", Description: schedulingv1.PriorityClass{}.SwaggerDoc()["value"]},
	{Name: "Global-Default", Type: "boolean", Description: schedulingv1.PriorityClass{}.SwaggerDoc()["globalDefault"]},
	{Name: "Age", Type: "string", Description: metav1.ObjectMeta{}.SwaggerDoc()["creationTimestamp"]},
	{Name: "PreemptionPolicy", Type: "string", Description: schedulingv1.PriorityClass{}.SwaggerDoc()["preemptionPolicy"]},
}

// TableRow returns the cells of one priority class: name (string), value
// (int64), globalDefault (bool), age (string) and preemption policy (string,
// empty when unset). obj must be a *schedulingv1.PriorityClass; anything else
// is an error.
func TableRow(obj runtime.Object) ([]interface{}, error) {
	pc, ok := obj.(*schedulingv1.PriorityClass)
	if !ok {
		return nil, fmt.Errorf("priorityclasses table: want *scheduling/v1.PriorityClass, got %T", obj)
	}
	policy := ""
	if pc.PreemptionPolicy != nil {
		policy = string(*pc.PreemptionPolicy)
	}
	return []interface{}{pc.Name, int64(pc.Value), pc.GlobalDefault, age(pc.CreationTimestamp), policy}, nil
}

// age is the time since t in kubectl's short form ("5m", "3d4h"), or
// "<unknown>" for the zero time.
func age(t metav1.Time) string {
	if t.IsZero() {
		return "<unknown>"
	}
	return duration.HumanDuration(now().Sub(t.Time))
}
