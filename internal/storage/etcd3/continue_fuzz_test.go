package etcd3

import (
	"strings"
	"testing"
)

// FuzzDecodeContinue feeds arbitrary continue tokens (user input on every
// paginated list) to the decoder: nothing may panic, and a token it
// accepts never points outside the listed prefix.
func FuzzDecodeContinue(f *testing.F) {
	good, err := encodeContinue("/registry/pods/default/b\x00", "/registry/pods/default/", 42)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(good)
	f.Add("eyJ2IjoibWV0YS5rOHMuaW8vdjEiLCJydiI6MSwic3RhcnQiOiIuLi8ifQ")
	f.Add("")
	f.Fuzz(func(t *testing.T, token string) {
		key, rev, err := decodeContinue(token, "/registry/pods/default/")
		if err != nil {
			return
		}
		if rev <= 0 {
			t.Fatalf("accepted token with revision %d", rev)
		}
		if !strings.HasPrefix(key, "/registry/pods/default/") {
			t.Fatalf("accepted token escapes the prefix: %q", key)
		}
	})
}
