// Package crd serves CustomResourceDefinitions (apiextensions.k8s.io/v1)
// and the custom resources they define, as registry.Resources built from
// k8s.io/apiextensions-apiserver's own registry, schema handling and
// controllers: structural validation, defaulting and pruning, CEL rules,
// the status and scale subresources, additionalPrinterColumns, versions
// converted by strategy None, the Established and NamesAccepted
// conditions and the cleanup of a deleted definition's objects. Custom
// resources are stored as JSON under /registry/<group>/<resource>/, the
// definitions as kube-apiserver stores them (JSON in
// apiextensions.k8s.io/v1beta1 under
// /registry/apiextensions.k8s.io/customresourcedefinitions/).
//
// A Manager keeps a registry.Catalog in step with the definitions: the
// resources of a definition are served once it is Established and stop
// being served when it is deleted.
package crd
