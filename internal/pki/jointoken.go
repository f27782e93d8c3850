package pki

import (
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"strings"

	bootstraputil "k8s.io/cluster-bootstrap/token/util"
)

// JoinTokenPrefix starts every join token: "K10" as in k3s's secure token
// format, so that a token is recognisable and the format can change later.
const JoinTokenPrefix = "K10"

// JoinToken is what a node needs to join a cluster: the hash of the
// cluster CA (to verify the server during discovery) and a bootstrap token
// (to authenticate until the node has a client certificate).
//
// Its string form is
//
//	K10<sha256 of the CA certificate's DER, 64 lower-case hex>::<id>.<secret>
//
// where <id>.<secret> is a bootstrap token ([a-z0-9]{6}.[a-z0-9]{16}), the
// token of the Secret kube-system/bootstrap-token-<id>.
type JoinToken struct {
	// CAHash is the SHA-256 of the CA certificate's DER bytes.
	CAHash [sha256.Size]byte
	// ID and Secret are the two halves of the bootstrap token.
	ID, Secret string
}

// String returns the token's wire form (see JoinToken).
func (t JoinToken) String() string {
	return JoinTokenPrefix + hex.EncodeToString(t.CAHash[:]) + "::" + t.BootstrapToken()
}

// BootstrapToken returns "<id>.<secret>", the bearer token the API server
// authenticates.
func (t JoinToken) BootstrapToken() string {
	return bootstraputil.TokenFromIDAndSecret(t.ID, t.Secret)
}

// ParseJoinToken decodes a join token string. An error says which part is
// wrong, never the secret.
func ParseJoinToken(s string) (JoinToken, error) {
	var t JoinToken
	s = strings.TrimSpace(s)
	if !strings.HasPrefix(s, JoinTokenPrefix) {
		return t, fmt.Errorf("join token: does not start with %q (format %s<CA hash>::<id>.<secret>)", JoinTokenPrefix, JoinTokenPrefix)
	}
	hashHex, bootstrap, ok := strings.Cut(strings.TrimPrefix(s, JoinTokenPrefix), "::")
	if !ok {
		return t, errors.New(`join token: no "::" between the CA hash and the bootstrap token`)
	}
	if len(hashHex) != hex.EncodedLen(sha256.Size) {
		return t, fmt.Errorf("join token: CA hash has %d characters, want %d hex digits", len(hashHex), hex.EncodedLen(sha256.Size))
	}
	if _, err := hex.Decode(t.CAHash[:], []byte(hashHex)); err != nil {
		return JoinToken{}, fmt.Errorf("join token: CA hash is not hex: %w", err)
	}
	if !bootstraputil.IsValidBootstrapToken(bootstrap) {
		return JoinToken{}, errors.New("join token: bootstrap token is not of the form [a-z0-9]{6}.[a-z0-9]{16}")
	}
	t.ID, t.Secret, _ = strings.Cut(bootstrap, ".")
	return t, nil
}

// CAHashOf returns the SHA-256 of the first certificate in caPEM, the hash
// a join token carries. It fails if caPEM holds no certificate.
func CAHashOf(caPEM []byte) ([sha256.Size]byte, error) {
	block, _ := pem.Decode(caPEM)
	if block == nil || block.Type != "CERTIFICATE" {
		return [sha256.Size]byte{}, errors.New("CA: no PEM certificate")
	}
	return sha256.Sum256(block.Bytes), nil
}

// VerifyCA checks that caPEM (as fetched from a server not yet trusted) is
// the CA whose hash the token carries. A mismatch is an error naming both
// hashes: the server is not the cluster the token was made for.
func (t JoinToken) VerifyCA(caPEM []byte) error {
	got, err := CAHashOf(caPEM)
	if err != nil {
		return err
	}
	if subtle.ConstantTimeCompare(got[:], t.CAHash[:]) != 1 {
		return fmt.Errorf("CA of the server has hash %x, the join token wants %x: refusing to join (wrong server or wrong token)", got, t.CAHash)
	}
	return nil
}

// NewJoinToken returns a join token with a fresh random bootstrap token for
// the CA in caPEM.
func NewJoinToken(caPEM []byte) (JoinToken, error) {
	hash, err := CAHashOf(caPEM)
	if err != nil {
		return JoinToken{}, err
	}
	tok, err := bootstraputil.GenerateBootstrapToken()
	if err != nil {
		return JoinToken{}, fmt.Errorf("generate bootstrap token: %w", err)
	}
	id, secret, _ := strings.Cut(tok, ".")
	return JoinToken{CAHash: hash, ID: id, Secret: secret}, nil
}
