package crd

import (
	"k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/install"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensionsv1beta1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1beta1"
	"k8s.io/apiextensions-apiserver/pkg/client/applyconfiguration"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/util/managedfields"
)

// Scheme knows the apiextensions.k8s.io types (internal, v1 and v1beta1)
// and the meta types served beside them, as apiextensions-apiserver's.
var Scheme = newScheme()

// Codecs encode and decode Scheme's types.
var Codecs = serializer.NewCodecFactory(Scheme)

// TypeConverter knows the structure of the apiextensions.k8s.io types, for
// managed fields and server-side apply.
var TypeConverter managedfields.TypeConverter = applyconfiguration.NewTypeConverter(Scheme)

// storageVersion is the version CustomResourceDefinitions are stored in:
// kube-apiserver keeps v1beta1 (the more compact one, kubernetes#82292).
var storageVersion = apiextensionsv1beta1.SchemeGroupVersion

// servedVersion is the version CustomResourceDefinitions are served at.
var servedVersion = apiextensionsv1.SchemeGroupVersion

func newScheme() *runtime.Scheme {
	s := runtime.NewScheme()
	install.Install(s)
	unversioned := schema.GroupVersion{Version: "v1"}
	metav1.AddToGroupVersion(s, unversioned)
	s.AddUnversionedTypes(unversioned, &metav1.Status{}, &metav1.WatchEvent{}, &metav1.APIVersions{},
		&metav1.APIGroupList{}, &metav1.APIGroup{}, &metav1.APIResourceList{})
	return s
}
