package app

import (
	"log/slog"
	"os"
	"runtime"
)

func setupLogging(level string) {
	var l slog.Level
	if err := l.UnmarshalText([]byte(level)); err != nil {
		l = slog.LevelInfo
	}
	slog.SetDefault(slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: l})))
}

func runtimeVersion() string { return runtime.Version() }

func platform() string { return runtime.GOOS + "/" + runtime.GOARCH }
