// Package plugins assembles the in-tree plugins: the registry of their
// factories and the default profile, with kube-scheduler's default order
// and score weights.
package plugins

import (
	corev1 "k8s.io/api/core/v1"

	"github.com/skiff-sh/skiff/internal/scheduler/framework"
	"github.com/skiff-sh/skiff/internal/scheduler/plugins/defaultpreemption"
	"github.com/skiff-sh/skiff/internal/scheduler/plugins/imagelocality"
	"github.com/skiff-sh/skiff/internal/scheduler/plugins/interpodaffinity"
	"github.com/skiff-sh/skiff/internal/scheduler/plugins/nodeaffinity"
	"github.com/skiff-sh/skiff/internal/scheduler/plugins/nodename"
	"github.com/skiff-sh/skiff/internal/scheduler/plugins/nodeports"
	"github.com/skiff-sh/skiff/internal/scheduler/plugins/noderesources"
	"github.com/skiff-sh/skiff/internal/scheduler/plugins/nodeunschedulable"
	"github.com/skiff-sh/skiff/internal/scheduler/plugins/podtopologyspread"
	"github.com/skiff-sh/skiff/internal/scheduler/plugins/tainttoleration"
)

// NewRegistry returns the factory of every in-tree plugin by name.
func NewRegistry() map[string]framework.Factory {
	return map[string]framework.Factory{
		nodeunschedulable.Name:               nodeunschedulable.New,
		nodename.Name:                        nodename.New,
		tainttoleration.Name:                 tainttoleration.New,
		nodeaffinity.Name:                    nodeaffinity.New,
		nodeports.Name:                       nodeports.New,
		noderesources.FitName:                noderesources.NewFit,
		podtopologyspread.Name:               podtopologyspread.New,
		interpodaffinity.Name:                interpodaffinity.New,
		defaultpreemption.Name:               defaultpreemption.New,
		noderesources.BalancedAllocationName: noderesources.NewBalancedAllocation,
		imagelocality.Name:                   imagelocality.New,
	}
}

// DefaultProfile is kube-scheduler's default profile restricted to the
// plugins skiff has: filters in kube-scheduler's order (the first that
// rejects a node gives the node's reason), and its default score weights.
func DefaultProfile() framework.Profile {
	return framework.Profile{
		SchedulerName: corev1.DefaultSchedulerName,
		Plugins: []string{
			nodeunschedulable.Name,
			nodename.Name,
			tainttoleration.Name,
			nodeaffinity.Name,
			nodeports.Name,
			noderesources.FitName,
			podtopologyspread.Name,
			interpodaffinity.Name,
			defaultpreemption.Name,
			noderesources.BalancedAllocationName,
			imagelocality.Name,
		},
		ScoreWeights: map[string]int64{
			tainttoleration.Name:                 3,
			nodeaffinity.Name:                    2,
			podtopologyspread.Name:               2,
			interpodaffinity.Name:                2,
			noderesources.FitName:                1,
			noderesources.BalancedAllocationName: 1,
			imagelocality.Name:                   1,
		},
	}
}
