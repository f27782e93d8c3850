package secrets

import (
	"encoding/json"
	"reflect"
	"sort"

	corev1 "k8s.io/api/core/v1"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/skiff-sh/skiff/internal/apiserver/registry/objectmeta"
)

// redacted stands for a secret value in error messages.
const redacted = "<secret contents redacted>"

// Validate checks a secret being created as kube-apiserver does: object
// metadata (namespace required, name a DNS-1123 subdomain), data keys valid
// config keys, at most 1 MiB of values, and the keys its type requires
// (service-account-token: the service account annotation; dockercfg and
// dockerconfigjson: a .dockercfg / .dockerconfigjson key holding JSON;
// basic-auth: username or password; ssh-auth: ssh-privatekey; tls: tls.crt
// and tls.key). stringData counts as data, overriding data's keys, since
// kube-apiserver merges it into data before validating; an empty type is
// Opaque. An empty list means valid; the secret is not modified.
func Validate(secret *corev1.Secret) field.ErrorList {
	errs := objectmeta.Validate(&secret.ObjectMeta, true, apivalidation.NameIsDNSSubdomain, field.NewPath("metadata"))
	return append(errs, validateData(secret, mergedData(secret))...)
}

// ValidateUpdate checks an update of a secret: the metadata update rules
// (resourceVersion required, name, namespace and uid immutable, ...), that
// the type does not change, and, once immutable is true, that it stays true
// and the data does not change; then the new secret as on create.
func ValidateUpdate(secret, old *corev1.Secret) field.ErrorList {
	errs := objectmeta.ValidateReplacement(&secret.ObjectMeta, &old.ObjectMeta, true, apivalidation.NameIsDNSSubdomain, field.NewPath("metadata"))
	errs = append(errs, apivalidation.ValidateImmutableField(secretType(secret), secretType(old), field.NewPath("type"))...)
	data := mergedData(secret)
	if old.Immutable != nil && *old.Immutable {
		if secret.Immutable == nil || !*secret.Immutable {
			errs = append(errs, field.Forbidden(field.NewPath("immutable"), "field is immutable when `immutable` is set"))
		}
		if !reflect.DeepEqual(data, mergedData(old)) {
			errs = append(errs, field.Forbidden(field.NewPath("data"), "field is immutable when `immutable` is set"))
		}
	}
	return append(errs, validateData(secret, data)...)
}

// secretType is the secret's type, Opaque when unset.
func secretType(s *corev1.Secret) corev1.SecretType {
	if s.Type == "" {
		return corev1.SecretTypeOpaque
	}
	return s.Type
}

// mergedData is data with stringData's entries written over it.
func mergedData(s *corev1.Secret) map[string][]byte {
	if len(s.StringData) == 0 {
		return s.Data
	}
	data := make(map[string][]byte, len(s.Data)+len(s.StringData))
	for k, v := range s.Data {
		data[k] = v
	}
	for k, v := range s.StringData {
		data[k] = []byte(v)
	}
	return data
}

func validateData(secret *corev1.Secret, data map[string][]byte) field.ErrorList {
	var errs field.ErrorList
	dataPath := field.NewPath("data")
	keys := make([]string, 0, len(data))
	for k := range data {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	total := 0
	for _, key := range keys {
		for _, msg := range validation.IsConfigMapKey(key) {
			errs = append(errs, field.Invalid(dataPath.Key(key), key, msg))
		}
		total += len(data[key])
	}
	if total > corev1.MaxSecretSize {
		errs = append(errs, field.TooLong(dataPath, "", corev1.MaxSecretSize))
	}

	requireKey := func(key string) bool {
		if _, ok := data[key]; !ok {
			errs = append(errs, field.Required(dataPath.Key(key), ""))
			return false
		}
		return true
	}
	requireJSON := func(key string) {
		if !requireKey(key) {
			return
		}
		if err := json.Unmarshal(data[key], &map[string]interface{}{}); err != nil {
			errs = append(errs, field.Invalid(dataPath.Key(key), redacted, err.Error()))
		}
	}
	switch secret.Type {
	case corev1.SecretTypeServiceAccountToken:
		// The token and the uid annotation are added by a controller later.
		if secret.Annotations[corev1.ServiceAccountNameKey] == "" {
			errs = append(errs, field.Required(field.NewPath("metadata", "annotations").Key(corev1.ServiceAccountNameKey), ""))
		}
	case corev1.SecretTypeDockercfg:
		requireJSON(corev1.DockerConfigKey)
	case corev1.SecretTypeDockerConfigJson:
		requireJSON(corev1.DockerConfigJsonKey)
	case corev1.SecretTypeBasicAuth:
		_, hasUser := data[corev1.BasicAuthUsernameKey]
		_, hasPassword := data[corev1.BasicAuthPasswordKey]
		// Either may be empty, but one must be there.
		if !hasUser && !hasPassword {
			errs = append(errs, field.Required(dataPath.Key(corev1.BasicAuthUsernameKey), ""),
				field.Required(dataPath.Key(corev1.BasicAuthPasswordKey), ""))
		}
	case corev1.SecretTypeSSHAuth:
		if len(data[corev1.SSHAuthPrivateKey]) == 0 {
			errs = append(errs, field.Required(dataPath.Key(corev1.SSHAuthPrivateKey), ""))
		}
	case corev1.SecretTypeTLS:
		requireKey(corev1.TLSCertKey)
		requireKey(corev1.TLSPrivateKeyKey)
	}
	return errs
}
