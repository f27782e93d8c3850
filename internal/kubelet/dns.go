package kubelet

import (
	"bufio"
	"io"
	"strings"

	corev1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// Limits of a pod's resolver configuration, as the kubelet's
// (pkg/kubelet/network/dns, validation.MaxDNSNameservers and
// MaxDNSSearchPaths).
const (
	maxDNSNameservers = 3
	maxDNSSearchPaths = 32
)

// clusterDNSOptions are the options of a ClusterFirst pod's resolv.conf.
var clusterDNSOptions = []string{"ndots:5"}

// podDNSConfig composes a pod's resolver configuration from its dnsPolicy
// and dnsConfig the way the kubelet's dns.Configurer.GetPodDNS does:
//
//   - None: only spec.dnsConfig.
//   - ClusterFirst (not hostNetwork) and ClusterFirstWithHostNet: the
//     cluster DNS servers, the search list "<ns>.svc.<domain>
//     svc.<domain> <domain>" followed by the host's search domains, and
//     "ndots:5". Without cluster DNS servers it falls back to Default.
//   - Default, and ClusterFirst with hostNetwork: the host's resolver.
//
// spec.dnsConfig is then appended (duplicates dropped, options overriding
// by name) and the result trimmed to the resolver's limits. host is the
// node's parsed resolv.conf; it is not modified. The result is never nil.
func podDNSConfig(pod *corev1.Pod, clusterDNS []string, clusterDomain string, host *runtimeapi.DNSConfig) *runtimeapi.DNSConfig {
	if host == nil {
		host = &runtimeapi.DNSConfig{}
	}
	cfg := &runtimeapi.DNSConfig{}
	switch policy := pod.Spec.DNSPolicy; {
	case policy == corev1.DNSNone:
	case len(clusterDNS) > 0 && (policy == corev1.DNSClusterFirstWithHostNet ||
		((policy == corev1.DNSClusterFirst || policy == "") && !pod.Spec.HostNetwork)):
		cfg.Servers = append([]string(nil), clusterDNS...)
		cfg.Searches = clusterSearches(pod.Namespace, clusterDomain, host.Searches)
		cfg.Options = append([]string(nil), clusterDNSOptions...)
	default:
		cfg.Servers = append([]string(nil), host.Servers...)
		cfg.Searches = append([]string(nil), host.Searches...)
		cfg.Options = append([]string(nil), host.Options...)
	}
	if dc := pod.Spec.DNSConfig; dc != nil {
		cfg.Servers = omitDuplicates(append(cfg.Servers, dc.Nameservers...))
		cfg.Searches = omitDuplicates(append(cfg.Searches, dc.Searches...))
		cfg.Options = mergeDNSOptions(cfg.Options, dc.Options)
	}
	if len(cfg.Servers) > maxDNSNameservers {
		cfg.Servers = cfg.Servers[:maxDNSNameservers]
	}
	if len(cfg.Searches) > maxDNSSearchPaths {
		cfg.Searches = cfg.Searches[:maxDNSSearchPaths]
	}
	return cfg
}

// clusterSearches is the search list of a ClusterFirst pod in namespace
// ns: the cluster's domains, then the host's.
func clusterSearches(ns, domain string, hostSearches []string) []string {
	if domain == "" {
		return append([]string(nil), hostSearches...)
	}
	s := []string{ns + ".svc." + domain, "svc." + domain, domain}
	return omitDuplicates(append(s, hostSearches...))
}

// omitDuplicates keeps the first occurrence of each string, in order.
func omitDuplicates(in []string) []string {
	seen := map[string]bool{}
	out := in[:0:0]
	for _, s := range in {
		if !seen[s] {
			seen[s] = true
			out = append(out, s)
		}
	}
	return out
}

// mergeDNSOptions appends the pod's options to existing ones ("name" or
// "name:value"); an option of the same name replaces the earlier one in
// place, as the kubelet's mergeDNSOptions.
func mergeDNSOptions(existing []string, opts []corev1.PodDNSConfigOption) []string {
	var names []string
	values := map[string]string{}
	set := func(name, opt string) {
		if _, ok := values[name]; !ok {
			names = append(names, name)
		}
		values[name] = opt
	}
	for _, o := range existing {
		name, _, _ := strings.Cut(o, ":")
		set(name, o)
	}
	for _, o := range opts {
		opt := o.Name
		if o.Value != nil {
			opt += ":" + *o.Value
		}
		set(o.Name, opt)
	}
	out := make([]string, 0, len(names))
	for _, n := range names {
		out = append(out, values[n])
	}
	return out
}

// parseResolvConf reads nameserver, search and options lines of a
// resolv.conf; the last search line wins and "." is dropped from it, as
// the kubelet's parser.
func parseResolvConf(r io.Reader) *runtimeapi.DNSConfig {
	cfg := &runtimeapi.DNSConfig{}
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		line := sc.Text()
		if i := strings.IndexAny(line, "#;"); i >= 0 {
			line = line[:i]
		}
		fs := strings.Fields(line)
		if len(fs) < 2 {
			continue
		}
		switch fs[0] {
		case "nameserver":
			cfg.Servers = append(cfg.Servers, fs[1])
		case "search":
			cfg.Searches = nil
			for _, s := range fs[1:] {
				if s != "." {
					cfg.Searches = append(cfg.Searches, strings.TrimSuffix(s, "."))
				}
			}
		case "options":
			cfg.Options = append(cfg.Options, fs[1:]...)
		}
	}
	return cfg
}
