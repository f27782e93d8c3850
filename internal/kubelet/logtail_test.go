package kubelet

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestLogTail(t *testing.T) {
	tests := []struct {
		name     string
		log      []string
		lines    int
		maxBytes int
		want     string
	}{
		{name: "partial line joined, no newline added", log: []string{"t stdout P DONE"}, lines: 80, maxBytes: 2048, want: "DONE"},
		{name: "partial then full", log: []string{"t stdout P DO", "t stdout F NE"}, lines: 80, maxBytes: 2048, want: "DONE\n"},
		{name: "full lines", log: []string{"t stdout F a", "t stderr F b", "t stdout F c"}, lines: 80, maxBytes: 2048, want: "a\nb\nc\n"},
		{name: "last lines", log: []string{"t stdout F a", "t stderr F b", "t stdout F c"}, lines: 2, maxBytes: 2048, want: "b\nc\n"},
		{name: "last lines with a partial end", log: []string{"t stdout F a", "t stderr F b", "t stdout P c"}, lines: 2, maxBytes: 2048, want: "b\nc"},
		{name: "byte limit", log: []string{"t stdout F abcdef"}, lines: 80, maxBytes: 3, want: "ef\n"},
		{name: "malformed lines skipped", log: []string{"garbage", "t stdout F ok"}, lines: 80, maxBytes: 2048, want: "ok\n"},
		{name: "empty", lines: 80, maxBytes: 2048, want: ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "0.log")
			content := strings.Join(tt.log, "\n")
			if len(tt.log) > 0 {
				content += "\n"
			}
			if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
				t.Fatal(err)
			}
			if got := logTail(path, tt.lines, tt.maxBytes); got != tt.want {
				t.Errorf("logTail = %q, want %q", got, tt.want)
			}
		})
	}
}
