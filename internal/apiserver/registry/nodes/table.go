package nodes

import (
	"fmt"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/duration"
)

// now is the clock the AGE cell is measured against; tests replace it.
var now = time.Now

const (
	// roleLabelPrefix marks a node role by label key: node-role.kubernetes.io/<role>.
	roleLabelPrefix = "node-role.kubernetes.io/"
	// roleLabel is the older form, kubernetes.io/role=<role>.
	roleLabel = "kubernetes.io/role"
)

// TableColumns are the columns of `kubectl get nodes`, as kube-apiserver
// serves them: NAME STATUS ROLES AGE VERSION, and with -o wide INTERNAL-IP
// EXTERNAL-IP OS-IMAGE KERNEL-VERSION CONTAINER-RUNTIME.
var TableColumns = []metav1.TableColumnDefinition{
	{Name: "Name", Type: "string", Format: "name", Description: metav1.ObjectMeta{}.SwaggerDoc()["name"]},
	{Name: "Status", Type: "string", Description: "The status of the node"},
	{Name: "Roles", Type: "string", Description: "The roles of the node"},
	{Name: "Age", Type: "string", Description: metav1.ObjectMeta{}.SwaggerDoc()["creationTimestamp"]},
	{Name: "Version", Type: "string", Description: corev1.NodeSystemInfo{}.SwaggerDoc()["kubeletVersion"]},
	{Name: "Internal-IP", Type: "string", Priority: 1, Description: corev1.NodeStatus{}.SwaggerDoc()["addresses"]},
	{Name: "External-IP", Type: "string", Priority: 1, Description: corev1.NodeStatus{}.SwaggerDoc()["addresses"]},
	{Name: "OS-Image", Type: "string", Priority: 1, Description: corev1.NodeSystemInfo{}.SwaggerDoc()["osImage"]},
	{Name: "Kernel-Version", Type: "string", Priority: 1, Description: corev1.NodeSystemInfo{}.SwaggerDoc()["kernelVersion"]},
	{Name: "Container-Runtime", Type: "string", Priority: 1, Description: corev1.NodeSystemInfo{}.SwaggerDoc()["containerRuntimeVersion"]},
}

// TableRow returns the cells of one node, one per TableColumns entry, all
// strings. obj must be a *corev1.Node; anything else is an error. The node is
// only read.
func TableRow(obj runtime.Object) ([]interface{}, error) {
	node, ok := obj.(*corev1.Node)
	if !ok {
		return nil, fmt.Errorf("nodes table: want *v1.Node, got %T", obj)
	}
	info := node.Status.NodeInfo
	return []interface{}{
		node.Name,
		status(node),
		roles(node),
		age(node.CreationTimestamp),
		info.KubeletVersion,
		address(node, corev1.NodeInternalIP),
		address(node, corev1.NodeExternalIP),
		orUnknown(info.OSImage),
		orUnknown(info.KernelVersion),
		orUnknown(info.ContainerRuntimeVersion),
	}, nil
}

// status is "Ready" or "NotReady" from the node's Ready condition (the last
// one listed wins; any status but True is NotReady), "Unknown" without one,
// followed by ",SchedulingDisabled" when the node is cordoned.
func status(node *corev1.Node) string {
	s := "Unknown"
	for _, c := range node.Status.Conditions {
		if c.Type != corev1.NodeReady {
			continue
		}
		s = "NotReady"
		if c.Status == corev1.ConditionTrue {
			s = "Ready"
		}
	}
	if node.Spec.Unschedulable {
		s += ",SchedulingDisabled"
	}
	return s
}

// roles is the sorted, comma-separated set of roles named by
// node-role.kubernetes.io/<role> label keys and kubernetes.io/role label
// values, or "<none>".
func roles(node *corev1.Node) string {
	set := map[string]bool{}
	for k, v := range node.Labels {
		switch {
		case strings.HasPrefix(k, roleLabelPrefix):
			if role := strings.TrimPrefix(k, roleLabelPrefix); role != "" {
				set[role] = true
			}
		case k == roleLabel && v != "":
			set[v] = true
		}
	}
	if len(set) == 0 {
		return "<none>"
	}
	list := make([]string, 0, len(set))
	for r := range set {
		list = append(list, r)
	}
	sort.Strings(list)
	return strings.Join(list, ",")
}

// address is the node's first address of type t, or "<none>".
func address(node *corev1.Node, t corev1.NodeAddressType) string {
	for _, a := range node.Status.Addresses {
		if a.Type == t {
			return a.Address
		}
	}
	return "<none>"
}

func orUnknown(s string) string {
	if s == "" {
		return "<unknown>"
	}
	return s
}

// age is the time since t in kubectl's short form ("5m", "3d4h"), or
// "<unknown>" for the zero time.
func age(t metav1.Time) string {
	if t.IsZero() {
		return "<unknown>"
	}
	return duration.HumanDuration(now().Sub(t.Time))
}
