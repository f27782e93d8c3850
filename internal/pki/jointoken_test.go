package pki

import (
	"strings"
	"testing"
)

func TestParseJoinToken(t *testing.T) {
	hash := strings.Repeat("ab", 32)
	tests := []struct {
		name    string
		in      string
		wantID  string
		wantErr string
	}{
		{name: "valid", in: "K10" + hash + "::abcdef.0123456789abcdef", wantID: "abcdef"},
		{name: "valid with newline", in: "K10" + hash + "::abcdef.0123456789abcdef\n", wantID: "abcdef"},
		{name: "empty", in: "", wantErr: "does not start"},
		{name: "bare bootstrap token", in: "abcdef.0123456789abcdef", wantErr: "does not start"},
		{name: "no separator", in: "K10" + hash + "abcdef.0123456789abcdef", wantErr: `no "::"`},
		{name: "short hash", in: "K10abcd::abcdef.0123456789abcdef", wantErr: "CA hash has 4 characters"},
		{name: "hash not hex", in: "K10" + strings.Repeat("zz", 32) + "::abcdef.0123456789abcdef", wantErr: "not hex"},
		{name: "secret too short", in: "K10" + hash + "::abcdef.0123", wantErr: "bootstrap token is not"},
		{name: "upper case id", in: "K10" + hash + "::ABCDEF.0123456789abcdef", wantErr: "bootstrap token is not"},
		{name: "no dot", in: "K10" + hash + "::abcdef0123456789abcdef", wantErr: "bootstrap token is not"},
		{name: "extra field", in: "K10" + hash + "::abcdef.0123456789abcdef::x", wantErr: "bootstrap token is not"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseJoinToken(tt.in)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("ParseJoinToken(%q) error = %v, want containing %q", tt.in, err, tt.wantErr)
				}
				if strings.Contains(err.Error(), "0123456789abcdef") {
					t.Errorf("error leaks the secret: %v", err)
				}
				return
			}
			if err != nil {
				t.Fatalf("ParseJoinToken(%q): %v", tt.in, err)
			}
			if got.ID != tt.wantID {
				t.Errorf("ID = %q, want %q", got.ID, tt.wantID)
			}
			if got.String() != strings.TrimSpace(tt.in) {
				t.Errorf("String() = %q, want %q", got.String(), strings.TrimSpace(tt.in))
			}
		})
	}
}

func TestJoinTokenVerifyCA(t *testing.T) {
	ca, err := EnsureCA(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	other, err := EnsureCA(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	tok, err := NewJoinToken(ca.CertPEM)
	if err != nil {
		t.Fatal(err)
	}
	parsed, err := ParseJoinToken(tok.String())
	if err != nil {
		t.Fatalf("round trip of %q: %v", tok.String(), err)
	}
	tests := []struct {
		name    string
		caPEM   []byte
		wantErr string
	}{
		{name: "same CA", caPEM: ca.CertPEM},
		{name: "other CA", caPEM: other.CertPEM, wantErr: "refusing to join"},
		{name: "not PEM", caPEM: []byte("hello"), wantErr: "no PEM certificate"},
		{name: "empty", caPEM: nil, wantErr: "no PEM certificate"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := parsed.VerifyCA(tt.caPEM)
			if tt.wantErr == "" {
				if err != nil {
					t.Fatalf("VerifyCA: %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("VerifyCA error = %v, want containing %q", err, tt.wantErr)
			}
		})
	}
}

func FuzzParseJoinToken(f *testing.F) {
	f.Add("K10" + strings.Repeat("ab", 32) + "::abcdef.0123456789abcdef")
	f.Add("K10::")
	f.Add("")
	f.Fuzz(func(t *testing.T, s string) {
		tok, err := ParseJoinToken(s)
		if err != nil {
			return
		}
		again, err := ParseJoinToken(tok.String())
		if err != nil {
			t.Fatalf("re-parse of %q: %v", tok.String(), err)
		}
		if again != tok {
			t.Fatalf("round trip changed %+v to %+v", tok, again)
		}
	})
}
