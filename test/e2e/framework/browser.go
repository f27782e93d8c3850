package framework

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/gorilla/websocket"
)

// ChromiumBinary is Debian's headless Chromium (package
// chromium-headless-shell), which hack/install-deps.sh installs.
const ChromiumBinary = "chromium-headless-shell"

// Browser is a headless Chromium the test started, driven over the
// DevTools protocol: one page, which stays open (its scripts and event
// streams keep running) while the test looks at it.
type Browser struct {
	proc *Process
	conn *websocket.Conn
	mu   sync.Mutex
	next int
}

var devtoolsRE = regexp.MustCompile(`DevTools listening on (ws://\S+)`)

// StartBrowser starts Chromium with a profile of its own and connects to
// its page; it is stopped (the whole process group, by its PID) when the
// test ends.
func StartBrowser(t testing.TB) *Browser {
	t.Helper()
	bin, err := exec.LookPath(ChromiumBinary)
	if err != nil {
		t.Fatalf("%s is not installed (make deps installs it): %v", ChromiumBinary, err)
	}
	cmd := exec.Command(bin, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
		"--remote-debugging-address=127.0.0.1", "--remote-debugging-port=0",
		"--user-data-dir="+t.TempDir(), "--window-size=1400,900", "about:blank")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	proc, err := startProcess(cmd)
	if err != nil {
		t.Fatal(err)
	}
	b := &Browser{proc: proc}
	t.Cleanup(func() {
		if b.conn != nil {
			b.conn.Close()
		}
		// Chromium's helpers (zygote, GPU, renderers) are in its group.
		_ = syscall.Kill(-proc.PID(), syscall.SIGKILL)
		proc.Kill()
	})
	found := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			if m := devtoolsRE.FindStringSubmatch(sc.Text()); m != nil {
				found <- m[1]
			}
		}
	}()
	var browserURL string
	select {
	case browserURL = <-found:
	case <-time.After(30 * time.Second):
		t.Fatal("chromium did not open its DevTools port within 30s")
	}
	// The page target's own WebSocket, from the /json list.
	host := strings.TrimPrefix(strings.SplitN(browserURL, "/devtools", 2)[0], "ws://")
	var pageURL string
	WaitFor(t, 10*time.Second, "chromium's page target", func() (bool, error) {
		resp, err := http.Get("http://" + host + "/json/list")
		if err != nil {
			return false, nil
		}
		defer resp.Body.Close()
		var targets []struct{ Type, WebSocketDebuggerURL string }
		if err := json.NewDecoder(resp.Body).Decode(&targets); err != nil {
			return false, nil
		}
		for _, tg := range targets {
			if tg.Type == "page" {
				pageURL = tg.WebSocketDebuggerURL
				return true, nil
			}
		}
		return false, nil
	})
	conn, _, err := websocket.DefaultDialer.Dial(pageURL, nil)
	if err != nil {
		t.Fatalf("connect to chromium's page: %v", err)
	}
	b.conn = conn
	return b
}

// call sends one DevTools command and returns its result, skipping the
// events the page sends meanwhile.
func (b *Browser) call(t testing.TB, method string, params any) json.RawMessage {
	t.Helper()
	b.mu.Lock()
	defer b.mu.Unlock()
	b.next++
	id := b.next
	if err := b.conn.WriteJSON(map[string]any{"id": id, "method": method, "params": params}); err != nil {
		t.Fatalf("devtools %s: %v", method, err)
	}
	_ = b.conn.SetReadDeadline(time.Now().Add(30 * time.Second))
	for {
		var msg struct {
			ID     int             `json:"id"`
			Result json.RawMessage `json:"result"`
			Error  *struct {
				Message string `json:"message"`
			} `json:"error"`
		}
		if err := b.conn.ReadJSON(&msg); err != nil {
			t.Fatalf("devtools %s: %v", method, err)
		}
		if msg.ID != id {
			continue
		}
		if msg.Error != nil {
			t.Fatalf("devtools %s: %s", method, msg.Error.Message)
		}
		return msg.Result
	}
}

// Navigate opens url in the page.
func (b *Browser) Navigate(t testing.TB, url string) {
	t.Helper()
	b.call(t, "Page.navigate", map[string]any{"url": url})
}

// Eval evaluates a JavaScript expression in the page and returns its
// value as text ("" for undefined or null).
func (b *Browser) Eval(t testing.TB, expr string) string {
	t.Helper()
	raw := b.call(t, "Runtime.evaluate", map[string]any{"expression": expr, "returnByValue": true})
	var res struct {
		Result struct {
			Value any `json:"value"`
		} `json:"result"`
	}
	if err := json.Unmarshal(raw, &res); err != nil {
		t.Fatal(err)
	}
	if res.Result.Value == nil {
		return ""
	}
	return fmt.Sprint(res.Result.Value)
}

// WaitText waits until expr evaluates to text that match accepts, and
// returns it.
func (b *Browser) WaitText(t testing.TB, timeout time.Duration, what, expr string, match func(string) bool) string {
	t.Helper()
	var last string
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	for {
		last = b.Eval(t, expr)
		if match(last) {
			return last
		}
		select {
		case <-ctx.Done():
			t.Fatalf("page: %s not seen within %v; last: %q", what, timeout, last)
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// Screenshot saves a PNG of the page at path.
func (b *Browser) Screenshot(t testing.TB, path string) {
	t.Helper()
	raw := b.call(t, "Page.captureScreenshot", map[string]any{"format": "png"})
	var res struct {
		Data string `json:"data"`
	}
	if err := json.Unmarshal(raw, &res); err != nil {
		t.Fatal(err)
	}
	png, err := base64.StdEncoding.DecodeString(res.Data)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, png, 0o644); err != nil {
		t.Fatal(err)
	}
}

// ArtifactsDir is where tests keep what a person may want to look at
// after a run (screenshots): $SKIFF_TEST_ARTIFACTS, or skiff-test-artifacts
// in the temporary directory. It is not removed.
func ArtifactsDir(t testing.TB) string {
	t.Helper()
	dir := os.Getenv("SKIFF_TEST_ARTIFACTS")
	if dir == "" {
		dir = os.TempDir() + "/skiff-test-artifacts"
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

var dashboardURLRE = regexp.MustCompile(`skiff dashboard: (http://127\.0\.0\.1:[0-9]+)/`)

// StartDashboard runs `skiff dashboard --port 0` as a user of the
// server's machine would (SKIFF_DATA_DIR set, no KUBECONFIG) and returns
// its URL; it is stopped by its PID when the test ends.
func (s *Server) StartDashboard(t testing.TB) string {
	t.Helper()
	cmd := exec.Command(SkiffBinary(t), "dashboard", "--port", "0")
	cmd.Env = append(cleanEnv(), "SKIFF_DATA_DIR="+s.DataDir)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	logs := &lockedWriter{mu: &sync.Mutex{}, w: &bytes.Buffer{}}
	cmd.Stderr = logs
	proc, err := startProcess(cmd)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := proc.Stop(10 * time.Second); err != nil {
			t.Errorf("skiff dashboard did not stop cleanly: %v\n%s", err, logs.String())
		}
	})
	found := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if m := dashboardURLRE.FindStringSubmatch(sc.Text()); m != nil {
				found <- m[1]
			}
		}
	}()
	select {
	case url := <-found:
		return url
	case <-proc.Done():
		t.Fatalf("skiff dashboard exited: %s", logs.String())
	case <-time.After(60 * time.Second):
		t.Fatalf("skiff dashboard did not print its URL within 60s: %s", logs.String())
	}
	return ""
}
