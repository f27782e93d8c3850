package framework

import "k8s.io/apimachinery/pkg/labels"

type noNamespaces struct{}

func (noNamespaces) Labels(string) labels.Set          { return nil }
func (noNamespaces) Matching(labels.Selector) []string { return nil }
