package integration

import (
	"context"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	flowcontrolv1 "k8s.io/api/flowcontrol/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	flowcontrolbootstrap "k8s.io/apiserver/pkg/apis/flowcontrol/bootstrap"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"

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

// TestAPFClassification: requests are classified by the FlowSchemas as
// kube-apiserver classifies them, upstream's e2e spec "requests can be
// classified by adding FlowSchema and PriorityLevelConfiguration": a new
// priority level and a flow schema for user noxu reach steady state (the
// schema's Dangling condition False, the level's nominal seats on
// /metrics), noxu's request is answered with their UIDs in the
// X-Kubernetes-PF-* headers, another user's with the UIDs of the schema
// and level that match it. A watch holds a seat of its level only until it
// is set up (were it held for the watch's life, the 4th of 6 watches on a
// level of 3 seats that rejects would get 429).
func TestAPFClassification(t *testing.T) {
	c := framework.NewCluster(t, framework.Options{DisableScheduler: true})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	fc := c.Client.FlowcontrolV1()
	pl, err := fc.PriorityLevelConfigurations().Create(ctx, &flowcontrolv1.PriorityLevelConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: "e2e-testing-prioritylevel"},
		Spec: flowcontrolv1.PriorityLevelConfigurationSpec{
			Type: flowcontrolv1.PriorityLevelEnablementLimited,
			Limited: &flowcontrolv1.LimitedPriorityLevelConfiguration{
				NominalConcurrencyShares: ptr.To[int32](1),
				BorrowingLimitPercent:    ptr.To[int32](0),
				LimitResponse:            flowcontrolv1.LimitResponse{Type: flowcontrolv1.LimitResponseTypeReject},
			},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	fs, err := fc.FlowSchemas().Create(ctx, &flowcontrolv1.FlowSchema{
		ObjectMeta: metav1.ObjectMeta{Name: "e2e-testing-flowschema"},
		Spec: flowcontrolv1.FlowSchemaSpec{
			MatchingPrecedence:         1000,
			PriorityLevelConfiguration: flowcontrolv1.PriorityLevelConfigurationReference{Name: pl.Name},
			DistinguisherMethod:        &flowcontrolv1.FlowDistinguisherMethod{Type: flowcontrolv1.FlowDistinguisherMethodByUserType},
			Rules: []flowcontrolv1.PolicyRulesWithSubjects{{
				Subjects:         []flowcontrolv1.Subject{{Kind: flowcontrolv1.SubjectKindUser, User: &flowcontrolv1.UserSubject{Name: "noxu"}}},
				NonResourceRules: []flowcontrolv1.NonResourcePolicyRule{{Verbs: []string{flowcontrolv1.VerbAll}, NonResourceURLs: []string{flowcontrolv1.NonResourceAll}}},
				ResourceRules: []flowcontrolv1.ResourcePolicyRule{{Verbs: []string{flowcontrolv1.VerbAll}, APIGroups: []string{flowcontrolv1.APIGroupAll},
					Resources: []string{flowcontrolv1.ResourceAll}, Namespaces: []string{flowcontrolv1.NamespaceEvery}, ClusterScope: true}},
			}},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	err = wait.PollUntilContextCancel(ctx, 100*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		got, err := fc.FlowSchemas().Get(ctx, fs.Name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		steady := false
		for _, cond := range got.Status.Conditions {
			steady = steady || (cond.Type == flowcontrolv1.FlowSchemaConditionDangling && cond.Status == flowcontrolv1.ConditionFalse)
		}
		metrics := rawRequest(ctx, t, c.RESTConfig, http.MethodGet, "/metrics", "", nil)
		return steady && strings.Contains(string(metrics.body), `apiserver_flowcontrol_nominal_limit_seats{priority_level="e2e-testing-prioritylevel"}`), nil
	})
	if err != nil {
		t.Fatalf("the flow schema and priority level do not reach steady state: %v", err)
	}
	asUser := func(name string) rawResponse {
		cfg := rest.CopyConfig(c.RESTConfig)
		cfg.Impersonate = rest.ImpersonationConfig{UserName: name, Groups: []string{"system:authenticated"}}
		return rawRequest(ctx, t, cfg, http.MethodGet, "/version", "", nil)
	}
	res := asUser("noxu")
	if res.code != http.StatusOK || res.header.Get(flowcontrolv1.ResponseHeaderMatchedFlowSchemaUID) != string(fs.UID) ||
		res.header.Get(flowcontrolv1.ResponseHeaderMatchedPriorityLevelConfigurationUID) != string(pl.UID) {
		t.Errorf("noxu's request: %d, headers %v; want the UIDs of %s and %s", res.code, res.header, fs.UID, pl.UID)
	}
	globalDefault, err := fc.FlowSchemas().Get(ctx, "global-default", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if res := asUser("foo"); res.code != http.StatusOK || res.header.Get(flowcontrolv1.ResponseHeaderMatchedFlowSchemaUID) != string(globalDefault.UID) {
		t.Errorf("foo's request: %d, headers %v; want global-default's UID %s", res.code, res.header, globalDefault.UID)
	}

	// A watch gives its seat back once it is set up: noxu's level has 3
	// seats (600 × 1 / 246 shares, rounded up; it borrows none) and
	// rejects what does not fit, yet 6 open watches leave room for a list.
	if _, err := c.Client.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "noxu-view"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "view"},
		Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: "noxu"}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	noxuConfig := rest.CopyConfig(c.RESTConfig)
	noxuConfig.Impersonate = rest.ImpersonationConfig{UserName: "noxu", Groups: []string{"system:authenticated"}}
	noxuConfig.QPS = -1
	noxu, err := kubernetes.NewForConfig(noxuConfig)
	if err != nil {
		t.Fatal(err)
	}
	err = wait.PollUntilContextCancel(ctx, 100*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		_, err := noxu.CoreV1().ConfigMaps("default").List(ctx, metav1.ListOptions{})
		return err == nil, nil
	})
	if err != nil {
		t.Fatalf("noxu cannot list config maps: %v", err)
	}
	for i := range 6 {
		w, err := noxu.CoreV1().ConfigMaps("default").Watch(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatalf("noxu's watch %d: %v", i+1, err)
		}
		defer w.Stop()
	}
	if _, err := noxu.CoreV1().ConfigMaps("default").List(ctx, metav1.ListOptions{}); err != nil {
		t.Errorf("a list beside 6 open watches: %v, want it served", err)
	}
}
