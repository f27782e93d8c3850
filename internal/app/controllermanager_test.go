package app

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/util/sets"
	genericcontrollermanager "k8s.io/controller-manager/app"
	kcm "k8s.io/kubernetes/cmd/kube-controller-manager/app"
	garbagecollectorconfig "k8s.io/kubernetes/pkg/controller/garbagecollector/config"
)

func TestKubeControllerManagerConfig(t *testing.T) {
	tests := []struct {
		name        string
		cfg         ControllerManagerConfig
		wantErr     string
		wantOn      []string
		wantOff     []string
		wantIPAM    bool
		wantElected bool
	}{
		{name: "defaults", wantElected: true,
			wantOn:  []string{"deployment-controller", "garbage-collector-controller", "node-lifecycle-controller", "namespace-controller", "serviceaccount-token-controller"},
			wantOff: []string{"bootstrap-signer-controller", "token-cleaner-controller"}},
		{name: "one off by alias", cfg: ControllerManagerConfig{Controllers: []string{"*", "-deployment"}}, wantElected: true,
			wantOn: []string{"replicaset-controller"}, wantOff: []string{"deployment-controller"}},
		{name: "only named, one off by default turned on", cfg: ControllerManagerConfig{Controllers: []string{"job-controller", "bootstrapsigner"}}, wantElected: true,
			wantOn: []string{"job-controller", "bootstrap-signer-controller"}, wantOff: []string{"deployment-controller", "namespace-controller"}},
		{name: "unknown controller", cfg: ControllerManagerConfig{Controllers: []string{"*", "-no-such"}}, wantErr: `"no-such" is not in the list of known controllers`},
		{name: "cluster cidr", cfg: ControllerManagerConfig{ClusterCIDR: "10.42.0.0/16"}, wantIPAM: true, wantElected: true},
		{name: "bad cluster cidr", cfg: ControllerManagerConfig{ClusterCIDR: "10.42.0.0"}, wantErr: "--cluster-cidr"},
		{name: "no leader election", cfg: ControllerManagerConfig{NoLeaderElection: true}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := kubeControllerManagerConfig(tt.cfg, "/pki")
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("error %v, want one containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			disabled := sets.NewString(kcm.ControllersDisabledByDefault()...)
			for _, name := range tt.wantOn {
				if !genericcontrollermanager.IsControllerEnabled(name, disabled, c.Generic.Controllers) {
					t.Errorf("%s is off with --controllers %v", name, c.Generic.Controllers)
				}
			}
			for _, name := range tt.wantOff {
				if genericcontrollermanager.IsControllerEnabled(name, disabled, c.Generic.Controllers) {
					t.Errorf("%s is on with --controllers %v", name, c.Generic.Controllers)
				}
			}
			if c.KubeCloudShared.AllocateNodeCIDRs != tt.wantIPAM || (tt.wantIPAM && (c.KubeCloudShared.ClusterCIDR != tt.cfg.ClusterCIDR || c.KubeCloudShared.CIDRAllocatorType != "RangeAllocator")) {
				t.Errorf("node IPAM %v with cluster CIDR %q, allocator %q", c.KubeCloudShared.AllocateNodeCIDRs, c.KubeCloudShared.ClusterCIDR, c.KubeCloudShared.CIDRAllocatorType)
			}
			le := c.Generic.LeaderElection
			if le.LeaderElect != tt.wantElected || le.ResourceName != "kube-controller-manager" || le.ResourceNamespace != "kube-system" || le.ResourceLock != "leases" {
				t.Errorf("leader election %+v", le)
			}
			// kube-controller-manager's defaults, untouched.
			if c.DeploymentController.ConcurrentDeploymentSyncs != 5 || c.NodeLifecycleController.NodeMonitorGracePeriod.Duration == 0 {
				t.Errorf("defaults lost: deployment syncs %d, node monitor grace period %v",
					c.DeploymentController.ConcurrentDeploymentSyncs, c.NodeLifecycleController.NodeMonitorGracePeriod.Duration)
			}
			if !slices.ContainsFunc(c.GarbageCollectorController.GCIgnoredResources, func(r garbagecollectorconfig.GroupResource) bool {
				return r.Resource == "events"
			}) {
				t.Errorf("garbage collector ignores %v, want events among them", c.GarbageCollectorController.GCIgnoredResources)
			}
			if c.SAController.RootCAFile != "/pki/ca.crt" || c.CSRSigningController.ClusterSigningKeyFile != "/pki/ca.key" {
				t.Errorf("CA files %q %q", c.SAController.RootCAFile, c.CSRSigningController.ClusterSigningKeyFile)
			}
		})
	}
}

func TestControllerManagerIdentity(t *testing.T) {
	dir := t.TempDir()
	first, err := controllerManagerIdentity(dir)
	if err != nil {
		t.Fatal(err)
	}
	again, err := controllerManagerIdentity(dir)
	if err != nil {
		t.Fatal(err)
	}
	if first != again {
		t.Errorf("identity changed across restarts: %q then %q", first, again)
	}
	host, _ := os.Hostname()
	if !strings.HasPrefix(first, host+"_") {
		t.Errorf("identity %q does not start with the host name", first)
	}
	other, err := controllerManagerIdentity(filepath.Join(t.TempDir()))
	if err != nil {
		t.Fatal(err)
	}
	if other == first {
		t.Errorf("two data dirs share identity %q", first)
	}
}
