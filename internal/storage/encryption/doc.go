// Package encryption gives skiff's storage kube-apiserver's encryption at
// rest: it loads an EncryptionConfiguration (apiserver.config.k8s.io/v1)
// with kube-apiserver's own loader and value transformers, generates the
// configuration `skiff server` uses when given none, and rotates its keys.
package encryption
