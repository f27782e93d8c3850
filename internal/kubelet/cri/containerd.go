package cri

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// Defaults of Config.
const (
	DefaultStopTimeout    = 10 * time.Second
	DefaultReadyTimeout   = 60 * time.Second
	DefaultRestartBackoff = time.Second
	DefaultMaxBackoff     = 30 * time.Second
	// stableRun is how long containerd must run for the restart back-off
	// to start again from RestartBackoff.
	stableRun = time.Minute
)

// maxLogSize is the size past which containerd's log is moved to
// containerd.log.1 (replacing it) when containerd starts.
const maxLogSize = 50 << 20

// maxSocketPath is the longest unix socket path Linux accepts (108 bytes
// with the terminating NUL), less the ".ttrpc" suffix of the second socket.
const maxSocketPath = 107 - len(".ttrpc")

// Config configures the containerd that StartContainerd runs.
type Config struct {
	// DataDir is the agent's data directory (e.g. <data-dir>/agent); all
	// of containerd's files go under it (see the package doc). Required.
	DataDir string
	// RegistriesFile defaults to DataDir/registries.yaml; it is read at
	// every (re)start of containerd (see Registries).
	RegistriesFile string
	// ImagesDir holds image tarballs to import; defaults to DataDir/images.
	ImagesDir string
	// Binaries: empty fields are looked up (PATH, then Debian's paths).
	Binaries Binaries
	// Snapshotter forces a snapshotter; empty picks overlayfs when an
	// overlay mount works under DataDir, else native.
	Snapshotter string
	// LogLevel is containerd's log level; default "info".
	LogLevel string
	// Logger receives skiff's own log lines; default slog.Default().
	Logger *slog.Logger
	// StopTimeout is how long containerd gets after SIGTERM before SIGKILL.
	StopTimeout time.Duration
	// ReadyTimeout bounds each wait for the CRI socket to answer.
	ReadyTimeout time.Duration
	// RestartBackoff is the first delay before restarting a containerd
	// that died (default 1s); it doubles up to MaxBackoff (default 30s)
	// and starts over after a minute of uptime.
	RestartBackoff time.Duration
	MaxBackoff     time.Duration
}

// Containerd is a supervised containerd child process. Its methods are safe
// for concurrent use.
type Containerd struct {
	cfg         Config
	log         *slog.Logger
	dir         string // DataDir/containerd
	socket      string
	cniConfDir  string
	snapshotter string

	mu       sync.Mutex
	proc     *process // nil between a death and the restart
	restarts int

	done chan struct{} // closed when supervision ended and containerd is stopped
	err  error         // why supervision ended abnormally; read after done

	// spawns carries start requests to the goroutine that forks containerd.
	spawns chan spawnRequest
}

// StartContainerd checks that containerd, runc and the CNI plugins are
// installed (else returns an error wrapping ErrNotInstalled that names the
// Debian packages), generates containerd's config under cfg.DataDir, starts
// containerd, waits for its CRI socket to answer, imports the pause image
// and the changed tarballs of the images directory, and returns.
//
// From then on it supervises containerd: when the process dies it is
// restarted with back-off (the socket stays the same). When ctx ends,
// containerd gets SIGTERM, then SIGKILL after StopTimeout, and Done is
// closed. containerd also gets SIGKILL if the agent process dies
// (Pdeathsig), and a containerd left running on the same data dir by an
// earlier agent is stopped, by the PID in its pid file, before the new one
// starts. Containers keep running in their shims across a containerd
// restart or stop, as with any containerd, and the next containerd finds
// them. If StartContainerd fails, it leaves no process behind.
func StartContainerd(ctx context.Context, cfg Config) (*Containerd, error) {
	if cfg.DataDir == "" {
		return nil, errors.New("containerd: Config.DataDir is required")
	}
	dataDir, err := filepath.Abs(cfg.DataDir)
	if err != nil {
		return nil, err
	}
	cfg.DataDir = dataDir
	if cfg.RegistriesFile == "" {
		cfg.RegistriesFile = filepath.Join(dataDir, "registries.yaml")
	}
	if cfg.ImagesDir == "" {
		cfg.ImagesDir = filepath.Join(dataDir, "images")
	}
	if cfg.LogLevel == "" {
		cfg.LogLevel = "info"
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.StopTimeout <= 0 {
		cfg.StopTimeout = DefaultStopTimeout
	}
	if cfg.ReadyTimeout <= 0 {
		cfg.ReadyTimeout = DefaultReadyTimeout
	}
	if cfg.RestartBackoff <= 0 {
		cfg.RestartBackoff = DefaultRestartBackoff
	}
	if cfg.MaxBackoff < cfg.RestartBackoff {
		cfg.MaxBackoff = max(DefaultMaxBackoff, cfg.RestartBackoff)
	}
	if err := cfg.Binaries.resolve(); err != nil {
		return nil, err
	}
	c := &Containerd{
		cfg:        cfg,
		log:        cfg.Logger.With("component", "containerd"),
		dir:        filepath.Join(dataDir, "containerd"),
		cniConfDir: filepath.Join(dataDir, "cni", "net.d"),
		done:       make(chan struct{}),
		spawns:     make(chan spawnRequest),
	}
	c.socket = filepath.Join(c.dir, "containerd.sock")
	if len(c.socket) > maxSocketPath {
		return nil, fmt.Errorf("containerd: socket path %s is longer than %d bytes; use a shorter data dir", c.socket, maxSocketPath)
	}
	for _, d := range []string{c.dir, c.rootDir(), c.stateDir(), c.cniConfDir} {
		if err := os.MkdirAll(d, 0o711); err != nil {
			return nil, fmt.Errorf("containerd: %w", err)
		}
	}
	c.stopStale()
	var reason string
	c.snapshotter, reason = chooseSnapshotter(cfg.Snapshotter, c.rootDir())
	if reason != "" {
		c.log.Warn("overlay mounts do not work here; using the native snapshotter", "reason", reason)
	}

	go c.spawner()
	p, err := c.start(ctx)
	if err != nil {
		close(c.spawns)
		return nil, err
	}
	c.proc = p
	if err := c.importPause(ctx); err != nil {
		c.stopProcess(p)
		close(c.spawns)
		return nil, err
	}
	if err := os.MkdirAll(cfg.ImagesDir, 0o755); err != nil {
		c.log.Warn("create images directory", "dir", cfg.ImagesDir, "err", err)
	}
	c.importImageDir(ctx, nil)
	go c.supervise(ctx)
	go c.watchImageDir(ctx, imageDirPoll)
	return c, nil
}

// Endpoint is the CRI endpoint ("unix:///…/containerd.sock") for Connect
// and k8s.io/cri-client. It does not change across restarts.
func (c *Containerd) Endpoint() string { return "unix://" + c.socket }

// Address is the path of containerd's socket (for ctr and containerd's
// own API).
func (c *Containerd) Address() string { return c.socket }

// CNIConfDir is the directory containerd reads the CNI config from; write
// it with WriteCNIConfig.
func (c *Containerd) CNIConfDir() string { return c.cniConfDir }

// Snapshotter is the snapshotter containerd's CRI plugin uses.
func (c *Containerd) Snapshotter() string { return c.snapshotter }

// LogFile is the file containerd's output goes to. At a start of
// containerd, a log past 50 MiB is first moved to LogFile()+".1".
func (c *Containerd) LogFile() string { return filepath.Join(c.dir, "containerd.log") }

// PID is the current containerd process id, or 0 while it is being
// restarted or after it stopped.
func (c *Containerd) PID() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.proc == nil {
		return 0
	}
	return c.proc.pid()
}

// Restarts counts the restarts after containerd died.
func (c *Containerd) Restarts() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.restarts
}

// Done is closed when supervision has ended (the context given to
// StartContainerd ended) and containerd has exited.
func (c *Containerd) Done() <-chan struct{} { return c.done }

// Err is nil until Done is closed; then it reports a stop that needed
// SIGKILL, else nil.
func (c *Containerd) Err() error {
	select {
	case <-c.done:
		return c.err
	default:
		return nil
	}
}

func (c *Containerd) rootDir() string    { return filepath.Join(c.dir, "root") }
func (c *Containerd) stateDir() string   { return filepath.Join(c.dir, "state") }
func (c *Containerd) configFile() string { return filepath.Join(c.dir, "config.toml") }
func (c *Containerd) pidFile() string    { return filepath.Join(c.dir, "containerd.pid") }

// supervise restarts containerd whenever it dies, until ctx ends; then it
// stops it and closes done.
func (c *Containerd) supervise(ctx context.Context) {
	defer close(c.done)
	defer close(c.spawns)
	backoff := c.cfg.RestartBackoff
	for {
		c.mu.Lock()
		p := c.proc
		c.mu.Unlock()
		if p != nil {
			select {
			case <-ctx.Done():
				c.err = c.stopProcess(p)
				c.mu.Lock()
				c.proc = nil
				c.mu.Unlock()
				return
			case <-p.done:
			}
			if time.Since(p.started) > stableRun {
				backoff = c.cfg.RestartBackoff
			}
			c.log.Error("containerd exited; restarting", "pid", p.pid(), "err", p.err, "uptime", time.Since(p.started).Round(time.Millisecond), "backoff", backoff, "log", c.LogFile())
			c.mu.Lock()
			c.proc = nil
			c.restarts++
			c.mu.Unlock()
		}
		t := time.NewTimer(backoff)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
		backoff = min(2*backoff, c.cfg.MaxBackoff)
		np, err := c.start(ctx)
		if err != nil {
			if ctx.Err() == nil {
				c.log.Error("restart containerd", "err", err)
			}
			continue
		}
		c.log.Info("containerd restarted", "pid", np.pid())
		c.mu.Lock()
		c.proc = np
		c.mu.Unlock()
		if err := c.importPause(ctx); err != nil && ctx.Err() == nil {
			c.log.Error("import pause image after restart", "err", err)
		}
	}
}

// start writes the config, starts containerd and waits until its CRI
// socket answers. On error no process is left running.
func (c *Containerd) start(ctx context.Context) (*process, error) {
	regs, err := LoadRegistries(c.cfg.RegistriesFile)
	if err != nil {
		return nil, fmt.Errorf("containerd: registries: %w", err)
	}
	port, err := freeLoopbackPort()
	if err != nil {
		return nil, fmt.Errorf("containerd: stream server port: %w", err)
	}
	conf := containerdConfig{
		Root:           c.rootDir(),
		State:          c.stateDir(),
		Socket:         c.socket,
		OptDir:         filepath.Join(c.dir, "opt"),
		LogLevel:       c.cfg.LogLevel,
		PauseImage:     PauseImage,
		Snapshotter:    c.snapshotter,
		Runc:           c.cfg.Binaries.Runc,
		CNIBinDir:      c.cfg.Binaries.CNIBinDir,
		CNIConfDir:     c.cniConfDir,
		StreamPort:     port,
		Registries:     regs,
		RestrictOOMAdj: true,
	}
	if err := os.WriteFile(c.configFile(), []byte(conf.render()), 0o600); err != nil {
		return nil, fmt.Errorf("containerd: %w", err)
	}
	rotateLog(c.LogFile(), maxLogSize)
	logf, err := os.OpenFile(c.LogFile(), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("containerd: %w", err)
	}
	defer logf.Close()
	logStart, _ := logf.Seek(0, 2)

	cmd := exec.Command(c.cfg.Binaries.Containerd, "--config", c.configFile())
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.Env = childEnv(c.cfg.Binaries)
	cmd.SysProcAttr = &syscall.SysProcAttr{
		// Its own process group: a terminal's Ctrl-C reaches the agent,
		// which then stops containerd in order.
		Setpgid: true,
		// containerd dies with the agent; a new agent starts a fresh one.
		Pdeathsig: syscall.SIGKILL,
	}
	p, err := c.spawn(cmd)
	if err != nil {
		return nil, fmt.Errorf("containerd: start %s: %w", c.cfg.Binaries.Containerd, err)
	}
	_ = os.WriteFile(c.pidFile(), []byte(strconv.Itoa(p.pid())+"\n"), 0o644)
	c.log.Info("containerd started", "pid", p.pid(), "socket", c.socket, "snapshotter", c.snapshotter, "log", c.LogFile())

	if err := c.waitReady(ctx, p); err != nil {
		c.stopProcess(p)
		return nil, fmt.Errorf("containerd: %w%s", err, logTail(c.LogFile(), logStart))
	}
	return p, nil
}

// waitReady polls the CRI Version RPC until it answers, p exits, ctx ends
// or ReadyTimeout passes.
func (c *Containerd) waitReady(ctx context.Context, p *process) error {
	ctx, cancel := context.WithTimeout(ctx, c.cfg.ReadyTimeout)
	defer cancel()
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	var last error
	for {
		if _, err := os.Stat(c.socket); err == nil {
			if last = criVersion(ctx, c.socket); last == nil {
				return nil
			}
			if status.Code(last) == codes.Unimplemented {
				// containerd serves, without the CRI plugin: its log says why.
				return fmt.Errorf("the CRI plugin did not load: %v", last)
			}
		}
		select {
		case <-p.done:
			return fmt.Errorf("exited while starting (%v)", p.err)
		case <-ctx.Done():
			return fmt.Errorf("CRI socket %s not answering after %v: %v", c.socket, c.cfg.ReadyTimeout, last)
		case <-tick.C:
		}
	}
}

// criVersion calls the CRI Version RPC on the socket once.
func criVersion(ctx context.Context, socket string) error {
	conn, err := grpc.NewClient("unix://"+socket, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return err
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	_, err = runtimeapi.NewRuntimeServiceClient(conn).Version(ctx, &runtimeapi.VersionRequest{})
	return err
}

// stopProcess sends SIGTERM, then SIGKILL after StopTimeout, and waits for
// the exit. It returns an error only when SIGKILL was needed.
func (c *Containerd) stopProcess(p *process) error {
	defer os.Remove(c.pidFile())
	if p.exited() {
		return nil
	}
	_ = syscall.Kill(p.pid(), syscall.SIGTERM)
	t := time.NewTimer(c.cfg.StopTimeout)
	defer t.Stop()
	select {
	case <-p.done:
		c.log.Info("containerd stopped", "pid", p.pid())
		return nil
	case <-t.C:
	}
	_ = syscall.Kill(p.pid(), syscall.SIGKILL)
	<-p.done
	err := fmt.Errorf("containerd pid %d ignored SIGTERM for %v; killed", p.pid(), c.cfg.StopTimeout)
	c.log.Warn(err.Error())
	return err
}

// stopStale stops a containerd left running by an earlier agent on the
// same data dir (its pid file names a live process whose command line is
// this config's containerd), by PID.
func (c *Containerd) stopStale() {
	data, err := os.ReadFile(c.pidFile())
	if err != nil {
		return
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(data)))
	if err != nil || pid <= 1 {
		return
	}
	cmdline, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	if err != nil || !bytes.Contains(cmdline, []byte("\x00--config\x00"+c.configFile()+"\x00")) {
		return
	}
	c.log.Warn("stopping containerd left by an earlier run", "pid", pid)
	_ = syscall.Kill(pid, syscall.SIGTERM)
	// Not our child: poll for its end with a deadline.
	deadline := time.NewTimer(c.cfg.StopTimeout)
	defer deadline.Stop()
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for processAlive(pid) {
		select {
		case <-deadline.C:
			_ = syscall.Kill(pid, syscall.SIGKILL)
			return
		case <-tick.C:
		}
	}
}

// processAlive reports whether pid exists and is not a zombie.
func processAlive(pid int) bool {
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	// The state follows the parenthesized command name.
	i := bytes.LastIndexByte(stat, ')')
	return i < 0 || i+2 >= len(stat) || stat[i+2] != 'Z'
}

// childEnv is the agent's environment with PATH extended by the
// directories of the binaries (the shim finds runc and itself there).
func childEnv(b Binaries) []string {
	dirs := []string{filepath.Dir(b.Containerd), filepath.Dir(b.Shim), filepath.Dir(b.Runc)}
	path := os.Getenv("PATH")
	for _, d := range append(dirs, "/usr/local/sbin", "/usr/local/bin", "/usr/sbin", "/usr/bin", "/sbin", "/bin") {
		if !strings.Contains(":"+path+":", ":"+d+":") {
			path = strings.TrimPrefix(path+":"+d, ":")
		}
	}
	env := []string{"PATH=" + path}
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "PATH=") {
			env = append(env, kv)
		}
	}
	return env
}

// freeLoopbackPort returns a TCP port that was free on 127.0.0.1.
func freeLoopbackPort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// rotateLog renames path to path.1 when it is larger than limit.
func rotateLog(path string, limit int64) {
	if fi, err := os.Stat(path); err == nil && fi.Size() > limit {
		_ = os.Rename(path, path+".1")
	}
}

// logTail returns, for an error message, the warning and error lines of
// the log written after offset, else its last lines; long lines are cut.
func logTail(path string, offset int64) string {
	data, err := os.ReadFile(path)
	if err != nil || int64(len(data)) <= offset {
		return ""
	}
	lines := strings.Split(strings.TrimSpace(string(data[offset:])), "\n")
	var important []string
	for _, l := range lines {
		if strings.Contains(l, "level=warning") || strings.Contains(l, "level=error") || strings.Contains(l, "level=fatal") {
			important = append(important, l)
		}
	}
	if len(important) > 0 {
		lines = important
	}
	if len(lines) > 10 {
		lines = lines[len(lines)-10:]
	}
	for i, l := range lines {
		if len(l) > 400 {
			lines[i] = l[:400] + "…"
		}
	}
	return "\n" + path + ":\n  " + strings.Join(lines, "\n  ")
}

type spawnRequest struct {
	cmd   *exec.Cmd
	reply chan spawnReply
}

type spawnReply struct {
	p   *process
	err error
}

// spawner starts the processes asked for on c.spawns from one OS thread
// that lives until supervision ends. Pdeathsig fires when the forking
// thread exits, not the process, and the Go runtime may end a thread (one
// that another goroutine locked and left); a dedicated locked thread keeps
// containerd tied to the agent's life only.
func (c *Containerd) spawner() {
	runtime.LockOSThread()
	// Never unlocked: when the channel closes, the goroutine exits and the
	// runtime ends the thread, after containerd has been stopped.
	for req := range c.spawns {
		p, err := startProcess(req.cmd)
		req.reply <- spawnReply{p, err}
	}
}

// spawn starts cmd on the spawner's thread.
func (c *Containerd) spawn(cmd *exec.Cmd) (*process, error) {
	reply := make(chan spawnReply, 1)
	c.spawns <- spawnRequest{cmd, reply}
	r := <-reply
	return r.p, r.err
}

// process is a started child and the goroutine waiting for it.
type process struct {
	cmd     *exec.Cmd
	started time.Time
	done    chan struct{}
	err     error // Wait's result; valid once done is closed
}

func startProcess(cmd *exec.Cmd) (*process, error) {
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	p := &process{cmd: cmd, started: time.Now(), done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		close(p.done)
	}()
	return p, nil
}

func (p *process) pid() int { return p.cmd.Process.Pid }

func (p *process) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}
