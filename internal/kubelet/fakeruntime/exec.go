package fakeruntime

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	utilexec "k8s.io/utils/exec"
)

// ExecSync runs a command against the container's fake filesystem: cat,
// test -f/-e, ls, true, false, exit N, echo, touch, rm, and `sh -c` of
// those. A non-zero exit is returned as a utilexec.CodeExitError, as the
// CRI client does.
func (r *Runtime) ExecSync(ctx context.Context, id string, cmd []string, timeout time.Duration) ([]byte, []byte, error) {
	if err := r.enter("ExecSync"); err != nil {
		return nil, nil, err
	}
	defer r.mu.Unlock()
	c, ok := r.containers[id]
	if !ok {
		return nil, nil, notFound("container", id)
	}
	r.advance(c)
	if c.status.State != runtimeapi.ContainerState_CONTAINER_RUNNING {
		return nil, nil, status.Errorf(codes.NotFound, "container %s is not running", id)
	}
	var stmts [][]string
	if len(cmd) >= 3 && strings.HasSuffix(cmd[0], "sh") && cmd[1] == "-c" {
		for _, s := range splitStatements(cmd[2]) {
			stmts = append(stmts, fields(s))
		}
	} else {
		stmts = [][]string{cmd}
	}
	var stdout, stderr strings.Builder
	code := 0
	for _, w := range stmts {
		if len(w) == 0 {
			continue
		}
		code = 0
		switch w[0][strings.LastIndex(w[0], "/")+1:] {
		case "true", ":", "sleep":
		case "false":
			code = 1
		case "exit":
			if len(w) > 1 {
				code, _ = strconv.Atoi(w[1])
			}
			return r.execResult(cmd, stdout.String(), stderr.String(), code)
		case "echo":
			stdout.WriteString(strings.Join(w[1:], " ") + "\n")
		case "cat", "ls", "test", "stat":
			for _, f := range w[1:] {
				if strings.HasPrefix(f, "-") {
					continue
				}
				content, ok := c.readFile(f)
				if !ok {
					fmt.Fprintf(&stderr, "%s: can't open '%s': No such file or directory\n", w[0], f)
					code = 1
					continue
				}
				if w[0] == "cat" {
					stdout.WriteString(content)
				}
			}
		case "touch":
			for _, f := range w[1:] {
				r.writeFile(c, f, "")
			}
		case "rm":
			for _, f := range w[1:] {
				if !strings.HasPrefix(f, "-") {
					delete(c.files, f)
				}
			}
		default:
			fmt.Fprintf(&stderr, "sh: %s: not found\n", w[0])
			code = 127
		}
	}
	return r.execResult(cmd, stdout.String(), stderr.String(), code)
}

func (r *Runtime) execResult(cmd []string, stdout, stderr string, code int) ([]byte, []byte, error) {
	if code == 0 {
		return []byte(stdout), []byte(stderr), nil
	}
	return []byte(stdout), []byte(stderr), utilexec.CodeExitError{
		Err:  fmt.Errorf("command '%s' exited with %d: %s", strings.Join(cmd, " "), code, stderr),
		Code: code,
	}
}

// DialContext connects to a port of a fake pod without any network: a
// port declared in the sandbox's port mappings of a sandbox with a running
// container answers (HTTP 200 "ok", or 500 while the file /tmp/unhealthy
// exists in one of its containers); anything else is refused. Use it as
// the kubelet's probe dialer for pods of a fake runtime.
func (r *Runtime) DialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	host, portStr, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, err
	}
	port, _ := strconv.Atoi(portStr)
	r.mu.Lock()
	var serving, unhealthy bool
	for sid, s := range r.sandboxes {
		if s.status.Network.GetIp() != host || s.status.State != runtimeapi.PodSandboxState_SANDBOX_READY {
			continue
		}
		declared := false
		for _, pm := range s.config.PortMappings {
			if int(pm.ContainerPort) == port {
				declared = true
			}
		}
		for _, c := range r.containers {
			if c.sandboxID != sid {
				continue
			}
			r.advance(c)
			if c.status.State == runtimeapi.ContainerState_CONTAINER_RUNNING {
				serving = serving || declared
				if _, ok := c.files["/tmp/unhealthy"]; ok {
					unhealthy = true
				}
			}
		}
	}
	r.mu.Unlock()
	if !serving {
		return nil, &net.OpError{Op: "dial", Net: network, Err: fmt.Errorf("connect: connection refused")}
	}
	client, server := net.Pipe()
	go serveOne(server, unhealthy)
	return client, nil
}

func serveOne(conn net.Conn, unhealthy bool) {
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
	br := bufio.NewReader(conn)
	for {
		req, err := http.ReadRequest(br)
		if err != nil {
			return
		}
		code, body := http.StatusOK, "ok"
		if unhealthy {
			code, body = http.StatusInternalServerError, "unhealthy"
		}
		resp := &http.Response{StatusCode: code, ProtoMajor: 1, ProtoMinor: 1, Request: req,
			ContentLength: int64(len(body)), Body: http.NoBody, Header: http.Header{}}
		resp.Body = nopCloser{strings.NewReader(body)}
		resp.Close = true
		_ = resp.Write(conn)
		return
	}
}

type nopCloser struct{ *strings.Reader }

func (nopCloser) Close() error { return nil }
