package apiserver

import (
	"bytes"
	"errors"
	"io"
	"strings"
	"testing"
	"testing/iotest"
)

func TestReadAllSized(t *testing.T) {
	body := strings.Repeat("x", 5000)
	tests := []struct {
		name      string
		r         io.Reader
		announced int64
		want      string
		wantErr   bool
	}{
		{name: "announced length", r: strings.NewReader(body), announced: 5000, want: body},
		{name: "unknown length", r: strings.NewReader(body), announced: -1, want: body},
		{name: "longer than announced", r: strings.NewReader(body), announced: 10, want: body},
		{name: "shorter than announced", r: strings.NewReader(body), announced: 9000, want: body},
		{name: "one byte at a time", r: iotest.OneByteReader(strings.NewReader(body)), announced: 5000, want: body},
		{name: "empty", r: strings.NewReader(""), announced: 0, want: ""},
		{name: "announced beyond the limit", r: strings.NewReader(body), announced: maxBodyBytes + 1, want: body},
		{name: "read error", r: io.MultiReader(strings.NewReader("abc"), iotest.ErrReader(errors.New("reset"))), announced: 100, want: "abc", wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := readAllSized(tt.r, tt.announced)
			if (err != nil) != tt.wantErr || !bytes.Equal(got, []byte(tt.want)) {
				t.Errorf("readAllSized = %d bytes, %v; want %d bytes, error %v", len(got), err, len(tt.want), tt.wantErr)
			}
		})
	}
}

func BenchmarkReadAllSized(b *testing.B) {
	body := bytes.Repeat([]byte("x"), 2500)
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		if _, err := readAllSized(bytes.NewReader(body), int64(len(body))); err != nil {
			b.Fatal(err)
		}
	}
}
