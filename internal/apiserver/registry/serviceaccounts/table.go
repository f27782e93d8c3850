package serviceaccounts

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

// TableColumns are the columns of `kubectl get serviceaccounts`, as
// kube-apiserver serves them: NAME SECRETS AGE.
var TableColumns = []metav1.TableColumnDefinition{
	{Name: "Name", Type: "string", Format: "name", Description: metav1.ObjectMeta{}.SwaggerDoc()["name"]},
	{Name: "Secrets", Type: "string", Description: corev1.ServiceAccount{}.SwaggerDoc()["secrets"]},
	{Name: "Age", Type: "string", Description: metav1.ObjectMeta{}.SwaggerDoc()["creationTimestamp"]},
}

// TableRow returns the cells of one service account: its name, the number
// of secrets it lists (int64) and its age. obj must be a
// *corev1.ServiceAccount; anything else is an error.
func TableRow(obj runtime.Object) ([]interface{}, error) {
	sa, ok := obj.(*corev1.ServiceAccount)
	if !ok {
		return nil, fmt.Errorf("serviceaccounts table: want *v1.ServiceAccount, got %T", obj)
	}
	return []interface{}{sa.Name, int64(len(sa.Secrets)), age(sa.CreationTimestamp)}, nil
}

// age is the time since t in kubectl's short form ("5m", "3d4h"), or
// "<unknown>" for the zero time.
func age(t metav1.Time) string {
	if t.IsZero() {
		return "<unknown>"
	}
	return duration.HumanDuration(now().Sub(t.Time))
}
