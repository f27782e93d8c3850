package app

import (
	"log/slog"
	"os"

	"k8s.io/klog/v2"
)

func setupLogging(level string) {
	var l slog.Level
	if err := l.UnmarshalText([]byte(level)); err != nil {
		l = slog.LevelInfo
	}
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: l}))
	slog.SetDefault(logger)
	// Upstream's components (controllers, admission, client-go) log through
	// klog: into the same handler, at the same level (klog's V(n) is slog
	// level -n, so only V(0) shows at info).
	klog.SetSlogLogger(logger)
}
