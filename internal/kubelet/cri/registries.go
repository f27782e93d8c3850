package cri

import (
	"errors"
	"fmt"
	"net/url"
	"os"
	"sort"
	"strings"

	"sigs.k8s.io/yaml"
)

// Registries is the content of registries.yaml, the one file that configures
// how the node's containerd reaches image registries. Its format is k3s's:
//
//	mirrors:
//	  docker.io:                      # registry host as written in image names ("*": any other host)
//	    endpoint:                     # tried in order, then the registry itself
//	      - "https://mirror.example.com:5000"
//	  registry.example.com:5000:
//	    endpoint:
//	      - "http://registry.example.com:5000"   # plain HTTP: an insecure registry
//	configs:
//	  mirror.example.com:5000:        # host[:port] of an endpoint or a registry
//	    auth:                         # credentials sent when a pull asks for none
//	      username: user
//	      password: secret
//	      # or auth: base64("user:secret"), or identity_token: ...
//	    tls:
//	      ca_file: /etc/ssl/private-ca.pem
//	      cert_file: /etc/ssl/client.pem  # client certificate and key
//	      key_file: /etc/ssl/client-key.pem
//	      insecure_skip_verify: true      # HTTPS without verifying the certificate
//
// Registries on localhost or a loopback address (127.0.0.1:5000) need no
// entry: they are reached over plain HTTP, as Docker does. Credentials from
// a pod's imagePullSecrets take precedence over those here. k3s's mirror
// "rewrite" rules are not supported (containerd itself has no such feature).
type Registries struct {
	Mirrors map[string]Mirror         `json:"mirrors,omitempty"`
	Configs map[string]RegistryConfig `json:"configs,omitempty"`
}

// Mirror lists the endpoints (URLs) tried, in order, for a registry host.
type Mirror struct {
	Endpoints []string `json:"endpoint"`
	// Rewrite is accepted only to report that it is unsupported.
	Rewrite map[string]string `json:"rewrite,omitempty"`
}

// RegistryConfig holds the credentials and TLS settings of one registry
// host[:port].
type RegistryConfig struct {
	Auth *RegistryAuth `json:"auth,omitempty"`
	TLS  *RegistryTLS  `json:"tls,omitempty"`
}

// RegistryAuth is one of: username and password; auth (base64 of
// "username:password"); identity_token.
type RegistryAuth struct {
	Username      string `json:"username,omitempty"`
	Password      string `json:"password,omitempty"`
	Auth          string `json:"auth,omitempty"`
	IdentityToken string `json:"identity_token,omitempty"`
}

// RegistryTLS configures HTTPS to a registry: files are PEM paths.
type RegistryTLS struct {
	CAFile             string `json:"ca_file,omitempty"`
	CertFile           string `json:"cert_file,omitempty"`
	KeyFile            string `json:"key_file,omitempty"`
	InsecureSkipVerify bool   `json:"insecure_skip_verify,omitempty"`
}

// LoadRegistries reads a registries.yaml file. A missing file is an empty
// configuration; a malformed one (unknown fields included) is an error.
func LoadRegistries(path string) (Registries, error) {
	data, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return Registries{}, nil
	}
	if err != nil {
		return Registries{}, err
	}
	r, err := ParseRegistries(data)
	if err != nil {
		return Registries{}, fmt.Errorf("%s: %w", path, err)
	}
	return r, nil
}

// ParseRegistries decodes and validates registries.yaml content.
func ParseRegistries(data []byte) (Registries, error) {
	var r Registries
	if err := yaml.UnmarshalStrict(data, &r); err != nil {
		return Registries{}, err
	}
	return r, r.Validate()
}

// Validate checks that hosts are non-empty, endpoints are http(s) URLs,
// rewrites are absent and TLS client certificates come with their key.
func (r Registries) Validate() error {
	var errs []error
	for _, host := range sortedKeys(r.Mirrors) {
		m := r.Mirrors[host]
		if host == "" {
			errs = append(errs, errors.New("mirrors: empty registry host"))
		}
		if len(m.Rewrite) > 0 {
			errs = append(errs, fmt.Errorf("mirrors[%q].rewrite: not supported", host))
		}
		for i, e := range m.Endpoints {
			u, err := url.Parse(e)
			if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
				errs = append(errs, fmt.Errorf("mirrors[%q].endpoint[%d]: %q is not an http:// or https:// URL", host, i, e))
			}
		}
	}
	for _, host := range sortedKeys(r.Configs) {
		c := r.Configs[host]
		if host == "" || strings.Contains(host, "/") {
			errs = append(errs, fmt.Errorf("configs: %q is not a registry host[:port]", host))
		}
		if c.TLS != nil && (c.TLS.CertFile == "") != (c.TLS.KeyFile == "") {
			errs = append(errs, fmt.Errorf("configs[%q].tls: cert_file and key_file go together", host))
		}
	}
	return errors.Join(errs...)
}

// writeTOML writes r as the CRI plugin's registry section. containerd 1.6's
// hosts.toml directories (config_path) would not reach loopback registries
// over plain HTTP, so the mirrors and configs tables are used: with them,
// containerd uses HTTP for localhost and loopback hosts.
func (r Registries) writeTOML(b *strings.Builder) {
	const prefix = `plugins."io.containerd.grpc.v1.cri".registry`
	fmt.Fprintf(b, "\n[%s]\n", prefix)
	for _, host := range sortedKeys(r.Mirrors) {
		fmt.Fprintf(b, "\n[%s.mirrors.%s]\n", prefix, tomlString(host))
		quoted := make([]string, len(r.Mirrors[host].Endpoints))
		for i, e := range r.Mirrors[host].Endpoints {
			quoted[i] = tomlString(e)
		}
		fmt.Fprintf(b, "  endpoint = [%s]\n", strings.Join(quoted, ", "))
	}
	for _, host := range sortedKeys(r.Configs) {
		c := r.Configs[host]
		if a := c.Auth; a != nil {
			fmt.Fprintf(b, "\n[%s.configs.%s.auth]\n", prefix, tomlString(host))
			writeTOMLStrings(b, "username", a.Username, "password", a.Password, "auth", a.Auth, "identitytoken", a.IdentityToken)
		}
		if t := c.TLS; t != nil {
			fmt.Fprintf(b, "\n[%s.configs.%s.tls]\n", prefix, tomlString(host))
			writeTOMLStrings(b, "ca_file", t.CAFile, "cert_file", t.CertFile, "key_file", t.KeyFile)
			fmt.Fprintf(b, "  insecure_skip_verify = %t\n", t.InsecureSkipVerify)
		}
	}
}

// writeTOMLStrings writes the non-empty key/value pairs kv.
func writeTOMLStrings(b *strings.Builder, kv ...string) {
	for i := 0; i+1 < len(kv); i += 2 {
		if kv[i+1] != "" {
			fmt.Fprintf(b, "  %s = %s\n", kv[i], tomlString(kv[i+1]))
		}
	}
}

// tomlString quotes s as a TOML basic string.
func tomlString(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for _, r := range s {
		switch {
		case r == '"' || r == '\\':
			b.WriteByte('\\')
			b.WriteRune(r)
		case r < 0x20 || r == 0x7f:
			fmt.Fprintf(&b, `\u%04X`, r)
		default:
			b.WriteRune(r)
		}
	}
	b.WriteByte('"')
	return b.String()
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
