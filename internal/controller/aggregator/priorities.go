package aggregator

import (
	"k8s.io/apimachinery/pkg/runtime/schema"
	controlplaneapiserver "k8s.io/kubernetes/pkg/controlplane/apiserver"
)

// Priority is the place of a group and of a version within its group in
// discovery: an APIService's groupPriorityMinimum and versionPriority.
type Priority = controlplaneapiserver.APIServicePriority

// KubeAPIServerPriorities is the priority kube-apiserver v1.37 gives each
// built-in group version it registers an APIService for: the generic
// control plane's table (upstream's DefaultGenericAPIServicePriorities)
// with kube-apiserver's own entries over it. A group version not listed
// gets no APIService, as in kube-apiserver.
func KubeAPIServerPriorities() map[schema.GroupVersion]Priority {
	m := controlplaneapiserver.DefaultGenericAPIServicePriorities()
	for gv, p := range kubeAPIServerPriorities {
		m[gv] = p
	}
	return m
}

// kubeAPIServerPriorities are the entries cmd/kube-apiserver adds to the
// generic table (its apiVersionPriorities, which it does not export);
// TestKubeAPIServerPriorities checks them against upstream's source.
var kubeAPIServerPriorities = map[schema.GroupVersion]Priority{
	{Group: "", Version: "v1"}:                        {Group: 18000, Version: 1},
	{Group: "apps", Version: "v1"}:                    {Group: 17800, Version: 15},
	{Group: "autoscaling", Version: "v1"}:             {Group: 17500, Version: 15},
	{Group: "autoscaling", Version: "v2"}:             {Group: 17500, Version: 30},
	{Group: "autoscaling", Version: "v2beta1"}:        {Group: 17500, Version: 9},
	{Group: "autoscaling", Version: "v2beta2"}:        {Group: 17500, Version: 1},
	{Group: "batch", Version: "v1"}:                   {Group: 17400, Version: 15},
	{Group: "batch", Version: "v1beta1"}:              {Group: 17400, Version: 9},
	{Group: "batch", Version: "v2alpha1"}:             {Group: 17400, Version: 9},
	{Group: "networking.k8s.io", Version: "v1"}:       {Group: 17200, Version: 15},
	{Group: "networking.k8s.io", Version: "v1beta1"}:  {Group: 17200, Version: 9},
	{Group: "policy", Version: "v1"}:                  {Group: 17100, Version: 15},
	{Group: "policy", Version: "v1beta1"}:             {Group: 17100, Version: 9},
	{Group: "storage.k8s.io", Version: "v1"}:          {Group: 16800, Version: 15},
	{Group: "storage.k8s.io", Version: "v1beta1"}:     {Group: 16800, Version: 9},
	{Group: "storage.k8s.io", Version: "v1alpha1"}:    {Group: 16800, Version: 1},
	{Group: "scheduling.k8s.io", Version: "v1"}:       {Group: 16600, Version: 15},
	{Group: "scheduling.k8s.io", Version: "v1beta1"}:  {Group: 16600, Version: 9},
	{Group: "scheduling.k8s.io", Version: "v1alpha3"}: {Group: 16600, Version: 3},
	{Group: "node.k8s.io", Version: "v1"}:             {Group: 16300, Version: 15},
	{Group: "node.k8s.io", Version: "v1alpha1"}:       {Group: 16300, Version: 1},
	{Group: "node.k8s.io", Version: "v1beta1"}:        {Group: 16300, Version: 9},
	{Group: "resource.k8s.io", Version: "v1"}:         {Group: 16200, Version: 21},
	{Group: "resource.k8s.io", Version: "v1beta2"}:    {Group: 16200, Version: 15},
	{Group: "resource.k8s.io", Version: "v1beta1"}:    {Group: 16200, Version: 9},
	{Group: "resource.k8s.io", Version: "v1alpha3"}:   {Group: 16200, Version: 1},
	{Group: "lifecycle.k8s.io", Version: "v1alpha1"}:  {Group: 15700, Version: 1},
}
