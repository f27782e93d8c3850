// Package registrystorage presents a skiff Store as Kubernetes'
// storage.Interface, so that upstream's registry (k8s.io/apiserver's
// generic registry Store and the strategies, hooks and subresources built
// on it) writes through skiff's storage and watch cache: objects convert
// between the registry's version (internal, for built-in types) and the
// version they are stored in, and the Store's API errors turn back into the
// storage errors the registry interprets.
package registrystorage
