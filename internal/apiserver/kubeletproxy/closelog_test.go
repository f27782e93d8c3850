package kubeletproxy

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"testing"

	"github.com/go-logr/logr/funcr"
	"k8s.io/klog/v2"
)

func TestNormalCloseLogger(t *testing.T) {
	var lines []string
	base := funcr.New(func(prefix, args string) { lines = append(lines, args) }, funcr.Options{Verbosity: 10, LogInfoLevel: ptr("level")})
	log := normalCloseLogger(klog.NewContext(context.Background(), base)).WithValues("k", "v")

	closed := &net.OpError{Op: "read", Net: "tcp", Err: net.ErrClosed}
	log.Error(closed, "Error on socket receive")
	log.Error(fmt.Errorf("reset: %w", errors.New("connection reset by peer")), "Error on socket receive")
	if len(lines) != 2 {
		t.Fatalf("lines %q", lines)
	}
	if !strings.Contains(lines[0], `"level"=4`) || strings.Contains(lines[0], `"error"=`) {
		t.Errorf("a closed connection's read logged as %s, want an info line at V(4)", lines[0])
	}
	if !strings.Contains(lines[1], `"error"="reset: connection reset by peer"`) || !strings.Contains(lines[1], `"k"="v"`) {
		t.Errorf("another error logged as %s, want it an error, with the logger's values", lines[1])
	}
}

func ptr[T any](v T) *T { return &v }
