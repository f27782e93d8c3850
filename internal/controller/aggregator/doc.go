// Package aggregator runs kube-apiserver's APIService controllers in skiff
// server: upstream's autoregistration (an APIService for each group version
// served, kept from the start, and one for each served version of each
// CustomResourceDefinition, kept while the definition lasts) and
// kube-aggregator's availability controllers (local APIServices Available;
// APIServices of a Service Available once their server answers discovery
// at one of the Service's ready endpoints).
package aggregator
