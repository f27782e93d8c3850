package etcd3

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"path"
	"strings"
)

// continueToken is the decoded form of a list's continue parameter, the
// same as Kubernetes': base64url(JSON) without padding.
type continueToken struct {
	APIVersion string `json:"v"`
	// ResourceVersion is the revision all pages are read at; -1 means the
	// latest (a token handed out with a 410 after compaction).
	ResourceVersion int64 `json:"rv"`
	// StartKey is the next key to read, relative to the list's prefix.
	StartKey string `json:"start"`
}

const continueAPIVersion = "meta.k8s.io/v1"

var (
	errInvalidContinue   = errors.New("continue key is not valid")
	errInvalidStartRV    = errors.New("continue key is not valid: incorrect encoded start resourceVersion (version meta.k8s.io/v1)")
	errEmptyStartKey     = errors.New("continue key is not valid: encoded start key empty (version meta.k8s.io/v1)")
	errUnknownContinueV1 = errors.New("continue key is not valid: server does not recognize this encoded version")
)

// encodeContinue returns the token that resumes a list of keyPrefix at key
// and revision rev.
func encodeContinue(key, keyPrefix string, rev int64) (string, error) {
	next := strings.TrimPrefix(key, keyPrefix)
	if next == key {
		return "", fmt.Errorf("encode continue: key %q is not under %q", key, keyPrefix)
	}
	out, err := json.Marshal(continueToken{APIVersion: continueAPIVersion, ResourceVersion: rev, StartKey: next})
	if err != nil {
		return "", fmt.Errorf("encode continue: %w", err)
	}
	return base64.RawURLEncoding.EncodeToString(out), nil
}

// decodeContinue returns the full key and revision a token resumes at. The
// key is cleaned so a client cannot escape keyPrefix with "..".
func decodeContinue(token, keyPrefix string) (string, int64, error) {
	data, err := base64.RawURLEncoding.DecodeString(token)
	if err != nil {
		return "", 0, fmt.Errorf("%w: %v", errInvalidContinue, err)
	}
	var c continueToken
	if err := json.Unmarshal(data, &c); err != nil {
		return "", 0, fmt.Errorf("%w: %v", errInvalidContinue, err)
	}
	if c.APIVersion != continueAPIVersion {
		return "", 0, fmt.Errorf("%w %v", errUnknownContinueV1, c.APIVersion)
	}
	if c.ResourceVersion == 0 {
		return "", 0, errInvalidStartRV
	}
	if c.StartKey == "" {
		return "", 0, errEmptyStartKey
	}
	key := c.StartKey
	if !strings.HasPrefix(key, "/") {
		key = "/" + key
	}
	cleaned := path.Clean(key)
	// The start key of a next page ends in "\x00", which Clean keeps.
	if cleaned != key {
		return "", 0, fmt.Errorf("%w: %v", errInvalidContinue, c.StartKey)
	}
	return keyPrefix + cleaned[1:], c.ResourceVersion, nil
}
