package integration

import (
	"context"
	"slices"
	"testing"
	"time"

	flowcontrolv1 "k8s.io/api/flowcontrol/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	flowcontrolbootstrap "k8s.io/apiserver/pkg/apis/flowcontrol/bootstrap"

	"github.com/skiff-sh/skiff/test/integration/framework"
)

// TestAPFBootstrapConfiguration: as kube-apiserver, the server creates the
// mandatory and suggested FlowSchemas and PriorityLevelConfigurations of
// API Priority and Fairness (upstream's bootstrap package is the list).
func TestAPFBootstrapConfiguration(t *testing.T) {
	c := framework.NewCluster(t, framework.Options{})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var wantFS, wantPL []string
	for _, fs := range slices.Concat(flowcontrolbootstrap.MandatoryFlowSchemas, flowcontrolbootstrap.SuggestedFlowSchemas) {
		wantFS = append(wantFS, fs.Name)
	}
	for _, pl := range slices.Concat(flowcontrolbootstrap.MandatoryPriorityLevelConfigurations, flowcontrolbootstrap.SuggestedPriorityLevelConfigurations) {
		wantPL = append(wantPL, pl.Name)
	}
	slices.Sort(wantFS)
	slices.Sort(wantPL)
	var gotFS, gotPL []string
	err := wait.PollUntilContextCancel(ctx, 200*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		fs, err := c.Client.FlowcontrolV1().FlowSchemas().List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		pl, err := c.Client.FlowcontrolV1().PriorityLevelConfigurations().List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		gotFS = names(fs.Items, func(f flowcontrolv1.FlowSchema) string { return f.Name })
		gotPL = names(pl.Items, func(p flowcontrolv1.PriorityLevelConfiguration) string { return p.Name })
		return slices.Equal(gotFS, wantFS) && slices.Equal(gotPL, wantPL), nil
	})
	if err != nil {
		t.Fatalf("flow schemas %v, want %v; priority levels %v, want %v", gotFS, wantFS, gotPL, wantPL)
	}
	exempt, err := c.Client.FlowcontrolV1().FlowSchemas().Get(ctx, "exempt", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if exempt.Spec.PriorityLevelConfiguration.Name != "exempt" || exempt.Annotations[flowcontrolv1.AutoUpdateAnnotationKey] != "true" {
		t.Errorf("flow schema exempt: %+v", exempt)
	}
}

func names[T any](items []T, name func(T) string) []string {
	out := make([]string, 0, len(items))
	for _, item := range items {
		out = append(out, name(item))
	}
	slices.Sort(out)
	return out
}
