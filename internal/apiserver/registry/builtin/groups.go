package builtin

import (
	"fmt"
	"strconv"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	batchv1 "k8s.io/api/batch/v1"
	certificatesv1 "k8s.io/api/certificates/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	eventsv1 "k8s.io/api/events/v1"
	flowcontrolv1 "k8s.io/api/flowcontrol/v1"
	networkingv1 "k8s.io/api/networking/v1"
	nodev1 "k8s.io/api/node/v1"
	policyv1 "k8s.io/api/policy/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	resourcev1 "k8s.io/api/resource/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	storagev1 "k8s.io/api/storage/v1"
	storagemigrationv1 "k8s.io/api/storagemigration/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apiserver/pkg/registry/generic"
	genericapiserver "k8s.io/apiserver/pkg/server"
	serverstorage "k8s.io/apiserver/pkg/server/storage"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"

	// The API groups skiff serves, registered in legacyscheme with their
	// internal types, conversions and defaults.
	_ "k8s.io/kubernetes/pkg/apis/admission/install"
	_ "k8s.io/kubernetes/pkg/apis/admissionregistration/install"
	_ "k8s.io/kubernetes/pkg/apis/apiserverinternal/install"
	_ "k8s.io/kubernetes/pkg/apis/apps/install"
	_ "k8s.io/kubernetes/pkg/apis/authentication/install"
	_ "k8s.io/kubernetes/pkg/apis/authorization/install"
	_ "k8s.io/kubernetes/pkg/apis/autoscaling/install"
	_ "k8s.io/kubernetes/pkg/apis/batch/install"
	_ "k8s.io/kubernetes/pkg/apis/certificates/install"
	_ "k8s.io/kubernetes/pkg/apis/coordination/install"
	_ "k8s.io/kubernetes/pkg/apis/core/install"
	_ "k8s.io/kubernetes/pkg/apis/discovery/install"
	_ "k8s.io/kubernetes/pkg/apis/events/install"
	_ "k8s.io/kubernetes/pkg/apis/extensions/install"
	_ "k8s.io/kubernetes/pkg/apis/flowcontrol/install"
	_ "k8s.io/kubernetes/pkg/apis/imagepolicy/install"
	_ "k8s.io/kubernetes/pkg/apis/lifecycle/install"
	_ "k8s.io/kubernetes/pkg/apis/networking/install"
	_ "k8s.io/kubernetes/pkg/apis/node/install"
	_ "k8s.io/kubernetes/pkg/apis/policy/install"
	_ "k8s.io/kubernetes/pkg/apis/rbac/install"
	_ "k8s.io/kubernetes/pkg/apis/resource/install"
	_ "k8s.io/kubernetes/pkg/apis/scheduling/install"
	_ "k8s.io/kubernetes/pkg/apis/storage/install"
	_ "k8s.io/kubernetes/pkg/apis/storagemigration/install"

	admissionregistrationrest "k8s.io/kubernetes/pkg/registry/admissionregistration/rest"
	appsrest "k8s.io/kubernetes/pkg/registry/apps/rest"
	authenticationrest "k8s.io/kubernetes/pkg/registry/authentication/rest"
	authorizationrest "k8s.io/kubernetes/pkg/registry/authorization/rest"
	autoscalingrest "k8s.io/kubernetes/pkg/registry/autoscaling/rest"
	batchrest "k8s.io/kubernetes/pkg/registry/batch/rest"
	certificatesrest "k8s.io/kubernetes/pkg/registry/certificates/rest"
	coordinationrest "k8s.io/kubernetes/pkg/registry/coordination/rest"
	discoveryrest "k8s.io/kubernetes/pkg/registry/discovery/rest"
	eventsrest "k8s.io/kubernetes/pkg/registry/events/rest"
	flowcontrolrest "k8s.io/kubernetes/pkg/registry/flowcontrol/rest"
	networkingrest "k8s.io/kubernetes/pkg/registry/networking/rest"
	noderest "k8s.io/kubernetes/pkg/registry/node/rest"
	policyrest "k8s.io/kubernetes/pkg/registry/policy/rest"
	rbacrest "k8s.io/kubernetes/pkg/registry/rbac/rest"
	resourcerest "k8s.io/kubernetes/pkg/registry/resource/rest"
	schedulingrest "k8s.io/kubernetes/pkg/registry/scheduling/rest"
	storagerest "k8s.io/kubernetes/pkg/registry/storage/rest"
	storagemigrationrest "k8s.io/kubernetes/pkg/registry/storagemigration/rest"
)

// enabledGroupVersions are the group versions kube-apiserver v1.37 serves
// by default: the stable ones (its alpha and beta versions are off unless
// enabled by flags).
var enabledGroupVersions = []schema.GroupVersion{
	corev1.SchemeGroupVersion,
	admissionregistrationv1.SchemeGroupVersion,
	appsv1.SchemeGroupVersion,
	authenticationv1.SchemeGroupVersion,
	authorizationv1.SchemeGroupVersion,
	autoscalingv1.SchemeGroupVersion,
	autoscalingv2.SchemeGroupVersion,
	batchv1.SchemeGroupVersion,
	certificatesv1.SchemeGroupVersion,
	coordinationv1.SchemeGroupVersion,
	discoveryv1.SchemeGroupVersion,
	eventsv1.SchemeGroupVersion,
	flowcontrolv1.SchemeGroupVersion,
	networkingv1.SchemeGroupVersion,
	nodev1.SchemeGroupVersion,
	policyv1.SchemeGroupVersion,
	rbacv1.SchemeGroupVersion,
	resourcev1.SchemeGroupVersion,
	schedulingv1.SchemeGroupVersion,
	storagev1.SchemeGroupVersion,
	storagemigrationv1.SchemeGroupVersion,
}

// groupOrder is the order of groups in kube-apiserver's discovery (kubectl
// resolves a name several groups share by it).
var groupOrder = []string{
	"", "apiregistration.k8s.io", "apps", "events.k8s.io", "authentication.k8s.io",
	"authorization.k8s.io", "autoscaling", "batch", "certificates.k8s.io",
	"networking.k8s.io", "policy", "rbac.authorization.k8s.io", "storage.k8s.io",
	"admissionregistration.k8s.io", "apiextensions.k8s.io", "scheduling.k8s.io",
	"coordination.k8s.io", "node.k8s.io", "discovery.k8s.io", "resource.k8s.io",
	"flowcontrol.apiserver.k8s.io", "storagemigration.k8s.io",
}

// storageProvider is one API group of upstream's registry.
type storageProvider interface {
	NewRESTStorage(serverstorage.APIResourceConfigSource, generic.RESTOptionsGetter) (genericapiserver.APIGroupInfo, error)
}

// providers are the API groups beyond core/v1, with what each needs.
func providers(cfg Config, factory informers.SharedInformerFactory, client kubernetes.Interface) []storageProvider {
	return []storageProvider{
		authenticationrest.RESTStorageProvider{Authenticator: cfg.ServiceAccountTokens.Reviews, APIAudiences: cfg.ServiceAccountTokens.APIAudiences},
		authorizationrest.RESTStorageProvider{Authorizer: cfg.Authorizer, RuleResolver: cfg.RuleResolver},
		certificatesrest.RESTStorageProvider{Authorizer: cfg.Authorizer},
		coordinationrest.RESTStorageProvider{},
		rbacrest.RESTStorageProvider{Authorizer: cfg.Authorizer},
		storagemigrationrest.RESTStorageProvider{},
		flowcontrolrest.RESTStorageProvider{InformerFactory: factory},
		autoscalingrest.RESTStorageProvider{},
		batchrest.RESTStorageProvider{},
		discoveryrest.StorageProvider{},
		networkingrest.RESTStorageProvider{},
		noderest.RESTStorageProvider{},
		policyrest.RESTStorageProvider{},
		schedulingrest.RESTStorageProvider{},
		storagerest.RESTStorageProvider{},
		appsrest.StorageProvider{},
		admissionregistrationrest.RESTStorageProvider{Authorizer: cfg.Authorizer, DiscoveryClient: client.Discovery()},
		eventsrest.RESTStorageProvider{TTL: cfg.EventTTL},
		resourcerest.RESTStorageProvider{NamespaceClient: client.CoreV1().Namespaces(), Authorizer: cfg.Authorizer},
	}
}

// convertOnRead are the resources whose stored objects lose in storage
// what their conversion from the internal version adds back, so reads go
// through the internal version (a differential test over every stored
// kind keeps this list exact).
var convertOnRead = map[string]bool{
	// The volume claim templates' apiVersion and kind (protobuf keeps no
	// TypeMeta of embedded objects).
	"statefulsets": true,
}

// fastFields are field sets read straight from stored objects, for the
// resources whose watches filter on fields in the hot path (each node's
// kubelet watches its pods by spec.nodeName). Each gives the same set as
// the registry's attribute function (checked by a differential test).
var fastFields = map[string]func(runtime.Object) (fields.Set, error){
	"pods": podFields,
}

func podFields(obj runtime.Object) (fields.Set, error) {
	pod, ok := obj.(*corev1.Pod)
	if !ok {
		return nil, fmt.Errorf("field selectors of pods: a %T is no pod", obj)
	}
	podIP := ""
	if len(pod.Status.PodIPs) > 0 {
		podIP = pod.Status.PodIPs[0].IP
	}
	return fields.Set{
		"metadata.name":            pod.Name,
		"metadata.namespace":       pod.Namespace,
		"spec.nodeName":            pod.Spec.NodeName,
		"spec.restartPolicy":       string(pod.Spec.RestartPolicy),
		"spec.schedulerName":       pod.Spec.SchedulerName,
		"spec.serviceAccountName":  pod.Spec.ServiceAccountName,
		"spec.hostNetwork":         strconv.FormatBool(pod.Spec.HostNetwork),
		"status.phase":             string(pod.Status.Phase),
		"status.podIP":             podIP,
		"status.nominatedNodeName": pod.Status.NominatedNodeName,
	}, nil
}
