package etcd

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/server/v3/embed"
	"go.etcd.io/etcd/server/v3/etcdserver/api/v3client"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// Defaults tuned for one machine.
const (
	// DefaultQuotaBackendBytes is the backend size limit: 8 GiB, etcd's
	// recommended maximum.
	DefaultQuotaBackendBytes = 8 << 30
	// DefaultSnapshotCount is the number of applied entries between raft
	// snapshots.
	DefaultSnapshotCount = 10000
	// DefaultReadyTimeout bounds how long Start waits for the member to
	// become ready to serve.
	DefaultReadyTimeout = 60 * time.Second
)

// Config configures the embedded etcd server.
type Config struct {
	// DataDir holds etcd's data; it is created with mode 0700 if missing
	// and its mode is tightened to 0700 if it exists.
	DataDir string
	// Name is the member name; "" means "skiff".
	Name string
	// ReadyTimeout bounds the wait for readiness; 0 means DefaultReadyTimeout.
	ReadyTimeout time.Duration
	// UnsafeNoFsync disables fsync. It loses data on a crash: for tests and
	// throwaway clusters only.
	UnsafeNoFsync bool
	// LogLevel is etcd's zap log level ("debug", "info", "warn", "error");
	// "" means "error".
	LogLevel string
}

// ClientSocketName is the member's only listener, in Config.DataDir: a
// unix socket of mode 0600 in a directory of mode 0700, so that only the
// owner of the process (root for `skiff server`) can connect. It serves
// gRPC and HTTP (/health, /version); `etcdctl --endpoints
// unix://<data-dir>/etcd/client.sock` reaches it as root. The member has
// no TCP listener and no peer listener: a single member has no peers to
// hear from, and embed starts without one (see peerURL).
const ClientSocketName = "client.sock"

// peerURL is the peer URL the member advertises in its cluster
// membership. Nothing listens on it: it names no file, and holds none of
// the data dir's path, which the initial-cluster string ("name=url,...")
// could not carry if it had a comma.
var peerURL = url.URL{Scheme: "unix", Host: "skiff-etcd-no-peer-listener"}

// maxSocketPath is the longest unix socket path Linux accepts
// (sizeof(sun_path) - 1).
const maxSocketPath = 107

// Server is a running embedded etcd member listening on unix sockets only.
type Server struct {
	etcd      *embed.Etcd
	endpoints []string
	closeOnce sync.Once
	// closing silences the listener errors etcd logs while shutting down.
	closing *atomic.Bool
}

// Start starts an embedded etcd member and returns once it is ready to
// serve clients, or with an error after Config.ReadyTimeout or when ctx
// ends first. Automatic
// compaction is off: the storage layer compacts (see the etcd3 storage
// package's RunCompactor). The caller must Close the server.
func Start(ctx context.Context, cfg Config) (*Server, error) {
	if cfg.DataDir == "" {
		return nil, errors.New("etcd: DataDir is required")
	}
	if err := os.MkdirAll(cfg.DataDir, 0o700); err != nil {
		return nil, fmt.Errorf("etcd: create data dir: %w", err)
	}
	if err := os.Chmod(cfg.DataDir, 0o700); err != nil {
		return nil, fmt.Errorf("etcd: data dir mode: %w", err)
	}
	return start(ctx, cfg)
}

func start(ctx context.Context, cfg Config) (*Server, error) {
	clientSock, err := socketPath(cfg.DataDir, ClientSocketName)
	if err != nil {
		return nil, err
	}
	closing := new(atomic.Bool)
	lg, err := newLogger(cfg.LogLevel, closing)
	if err != nil {
		return nil, err
	}

	ec := embed.NewConfig()
	ec.Name = cfg.Name
	if ec.Name == "" {
		ec.Name = "skiff"
	}
	ec.Dir = cfg.DataDir
	clientURL := url.URL{Scheme: "unix", Path: clientSock}
	ec.ListenClientUrls = []url.URL{clientURL}
	ec.AdvertiseClientUrls = []url.URL{clientURL}
	ec.ListenPeerUrls = nil
	ec.AdvertisePeerUrls = []url.URL{peerURL}
	ec.InitialCluster = ec.InitialClusterFromName(ec.Name)
	ec.SnapshotCount = DefaultSnapshotCount
	ec.QuotaBackendBytes = DefaultQuotaBackendBytes
	ec.AutoCompactionMode = embed.CompactorModePeriodic
	ec.AutoCompactionRetention = "0" // off: the storage layer compacts
	ec.UnsafeNoFsync = cfg.UnsafeNoFsync
	ec.EnableGRPCGateway = false
	ec.Metrics = "basic"
	ec.ZapLoggerBuilder = embed.NewZapLoggerBuilder(lg)
	ec.Logger = "zap"

	e, err := embed.StartEtcd(ec)
	if err != nil {
		return nil, fmt.Errorf("etcd: start in %s: %w", cfg.DataDir, err)
	}
	// The listener exists once StartEtcd returns. The directory (0700)
	// already keeps others out; the socket's own mode does too, should the
	// directory be opened up.
	if err := os.Chmod(clientSock, 0o600); err != nil {
		closing.Store(true)
		e.Close()
		return nil, fmt.Errorf("etcd: socket mode: %w", err)
	}
	timeout := cfg.ReadyTimeout
	if timeout <= 0 {
		timeout = DefaultReadyTimeout
	}
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case <-e.Server.ReadyNotify():
	case err := <-e.Err():
		closing.Store(true)
		e.Close()
		return nil, fmt.Errorf("etcd: failed before ready: %w", err)
	case <-t.C:
		closing.Store(true)
		e.Close()
		return nil, fmt.Errorf("etcd: not ready after %s", timeout)
	case <-ctx.Done():
		closing.Store(true)
		e.Close()
		return nil, fmt.Errorf("etcd: waiting for readiness: %w", ctx.Err())
	}
	return &Server{etcd: e, endpoints: []string{clientURL.String()}, closing: closing}, nil
}

// Endpoints returns the client URLs, e.g.
// ["unix:///var/lib/skiff/etcd/client.sock"], for NewClient.
func (s *Server) Endpoints() []string {
	return append([]string(nil), s.endpoints...)
}

// Client returns a client that calls this member in-process: the same
// clientv3 API, with requests handed to the server's gRPC service
// implementations as function calls, without a socket, HTTP/2 framing or
// protobuf marshalling. The server's own checks (request size, quota,
// auth) still apply. Close it before the server.
func (s *Server) Client() *clientv3.Client {
	return v3client.New(s.etcd.Server)
}

// Err reports a fatal server error; it receives at most once.
func (s *Server) Err() <-chan error {
	return s.etcd.Err()
}

// Close stops the member gracefully and releases its ports and data
// directory. It is safe to call more than once.
func (s *Server) Close() {
	s.closeOnce.Do(func() {
		s.closing.Store(true)
		s.etcd.Close()
	})
}

// socketPath returns the absolute path of socket name in dir, or an error
// when it is too long for a unix socket.
func socketPath(dir, name string) (string, error) {
	abs, err := filepath.Abs(filepath.Join(dir, name))
	if err != nil {
		return "", fmt.Errorf("etcd: socket path: %w", err)
	}
	if len(abs) > maxSocketPath {
		return "", fmt.Errorf("etcd: socket path %s is %d bytes, longer than the %d a unix socket allows: use a shorter data dir", abs, len(abs), maxSocketPath)
	}
	return abs, nil
}

// newLogger returns a JSON zap logger on stderr at the given level
// ("" = error). Once closing is set (it may be nil), the errors etcd logs
// about its listeners closing are dropped.
func newLogger(level string, closing *atomic.Bool) (*zap.Logger, error) {
	if level == "" {
		level = "error"
	}
	lvl, err := zapcore.ParseLevel(level)
	if err != nil {
		return nil, fmt.Errorf("etcd: log level %q: %w", level, err)
	}
	zc := zap.NewProductionConfig()
	zc.Level = zap.NewAtomicLevelAt(lvl)
	zc.Sampling = nil
	zc.OutputPaths = []string{"stderr"}
	zc.ErrorOutputPaths = []string{"stderr"}
	var opts []zap.Option
	if closing != nil {
		opts = append(opts, zap.WrapCore(func(c zapcore.Core) zapcore.Core {
			return shutdownFilter{Core: c, closing: closing}
		}))
	}
	lg, err := zc.Build(opts...)
	if err != nil {
		return nil, fmt.Errorf("etcd: build logger: %w", err)
	}
	return lg, nil
}

// shutdownFilter drops the "serving failed" errors every listener reports
// when the server closes them on purpose.
type shutdownFilter struct {
	zapcore.Core
	closing *atomic.Bool
}

func (f shutdownFilter) With(fields []zapcore.Field) zapcore.Core {
	return shutdownFilter{Core: f.Core.With(fields), closing: f.closing}
}

func (f shutdownFilter) Check(e zapcore.Entry, ce *zapcore.CheckedEntry) *zapcore.CheckedEntry {
	if f.closing.Load() && e.Message == "setting up serving from embedded etcd failed." {
		return ce
	}
	return f.Core.Check(e, ce)
}
